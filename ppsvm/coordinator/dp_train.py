"""``ppsvm coordinator train --method dp-hybrid | private-svm | public-only`` (Li et al. 2014).

The coordinator reads only the *public* records: from them it takes the feature
scaling, the kernel width and rho (learned for dp-hybrid, drawn at random for
private-svm). Each entity (row blocks holding every feature and the label,
s = 1) maps its rows with zhat, trains the exact linear SVM and releases its
weights through a DP mechanism, charged to its own release log. The model's
weights are the n_i-weighted mean of the releases: each is epsilon-DP for its
entity's records, and averaging released values costs no further privacy.

Then the decision threshold (:mod:`ppsvm.core.threshold`): each entity releases a
histogram of the averaged model's scores on its training records per class, with
discrete Laplace noise, charged as a second release of ``threshold_epsilon``; the
coordinator cuts where the summed histograms show the fewest training errors.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppsvm.config import Federation
from ppsvm.constants import DEFAULT_DEADLINE_S
from ppsvm.coordinator.federation import Session
from ppsvm.coordinator.train import distribute
from ppsvm.core.dp import (
    DEFAULT_HUBER_H,
    DEFAULT_N_FREQUENCIES,
    MECHANISMS,
    NON_PRIVATE,
    expected_noise_norm,
    weight_bound,
)
from ppsvm.core.dp_model import METHODS, DpEntity, DpModel
from ppsvm.core.dp_selection import (
    C_GRID,
    DEFAULT_FACTOR,
    NOISE_TO_BOUND,
    PAPER_C,
    SELECTION_STREAM,
    WIDTH_FACTORS,
    default_C,
    select_c_and_width,
    simulated_release,
)
from ppsvm.core.fourier import learn_frequencies, public_preprocessing, random_frequencies
from ppsvm.core.kernels import gaussian_kernel
from ppsvm.core.linear_svm import DEFAULT_C, train_kernel_svm
from ppsvm.core.threshold import (
    DEFAULT_THRESHOLD_EPSILON,
    choose_threshold,
    count_noise_std,
    threshold_edge_count,
    threshold_edges,
    zero_margin_stds,
)
from ppsvm.data.sources import load_cell
from ppsvm.errors import ConfigError, DataError, PrivacyError
from ppsvm.wire.rpc import ppsvm_pb2 as pb

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class DpOptions:
    """Settings of one DP training run.

    Attributes
    ----------
    method : {"dp-hybrid", "private-svm", "public-only"}
    public : Path
        Public records, in the cell format (``id,label,features...``); every row is used.
    mechanism : {"laplace", "output-gamma", "objective", "none"}
        "none" releases unnoised weights (NOT PRIVATE) and needs each entity's own consent.
    epsilon : float or None
        Per release; None only with mechanism "none" or method "public-only".
    C, width_factor : float or None
        The SVM cost and the multiple of the median heuristic's kernel width. None chooses them
        (:mod:`ppsvm.core.dp_selection`): C as the largest the expected noise allows, the width by
        cross-validation on the public records. public-only takes C = 1 for None.
    threshold_epsilon : float or None
        What each entity spends on its score histogram, from which the decision threshold is chosen;
        None keeps the threshold at 0 (the paper's models). Not used by public-only.
    seed : int
        Seed of rho's start (dp-hybrid) or draw (private-svm): rho is public, so a seed is fine.
    allow_noisy : bool
        Release even where the expected noise exceeds the bound on the weights (:func:`preflight`).
    """

    method: str
    public: Path
    mechanism: str = "laplace"
    epsilon: float | None = None
    n_frequencies: int = DEFAULT_N_FREQUENCIES
    C: float | None = DEFAULT_C
    width_factor: float | None = 1.0
    huber_h: float = DEFAULT_HUBER_H
    threshold_epsilon: float | None = DEFAULT_THRESHOLD_EPSILON
    seed: int = 0
    deadline: float = DEFAULT_DEADLINE_S
    distribute: bool = True
    allow_noisy: bool = False

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.mechanism not in (*MECHANISMS, NON_PRIVATE):
            raise ConfigError(
                f"mechanism must be one of {', '.join((*MECHANISMS, NON_PRIVATE))}, got {self.mechanism!r}"
            )
        needs_epsilon = self.method != "public-only" and self.mechanism != NON_PRIVATE
        if needs_epsilon and (self.epsilon is None or not (math.isfinite(self.epsilon) and self.epsilon > 0)):
            raise ConfigError(
                f"--epsilon must be a number > 0 for {self.method} with "
                f"the {self.mechanism} mechanism, got {self.epsilon}"
            )
        if not needs_epsilon and self.epsilon is not None:
            raise ConfigError(
                f"--epsilon does not apply to {self.method if self.method == 'public-only' else 'mechanism none'}"
            )
        if self.threshold_epsilon is not None and not (
            math.isfinite(self.threshold_epsilon) and self.threshold_epsilon > 0
        ):
            raise ConfigError(
                f"--threshold-epsilon must be a number > 0 (or 0 for no threshold), got {self.threshold_epsilon}"
            )
        if self.n_frequencies < 1:
            raise ConfigError(f"--frequencies must be >= 1, got {self.n_frequencies}")
        for flag, value in (("--C", self.C), ("--width-factor", self.width_factor)):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ConfigError(f"{flag} must be a number > 0 or auto, got {value}")


def load_public(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Every record of the public file (training and held-out alike): X (m, d), y (m,) in {-1, +1}."""
    cell = load_cell(path)
    if cell.y_train is None or cell.y_test is None:
        raise DataError(f"{path}: public records need a label column")
    X = np.vstack([cell.X_train, cell.X_test])
    y = np.concatenate([cell.y_train, cell.y_test])
    if len(np.unique(y)) < 2:
        raise DataError(f"{path}: the public records hold one class only; both are needed")
    return X, y


def train_dp(federation: Federation | None, options: DpOptions) -> DpModel:
    """Train a DP (or public-only) RBF model; ``federation`` may be None for public-only."""
    started = time.perf_counter()
    X_public, y_public = load_public(options.public)
    public = public_preprocessing(X_public)
    low, high, scaled, width = public.low, public.high, public.scaled, public.width
    low_public, high_public = tuple(low.tolist()), tuple(high.tolist())
    if options.method == "public-only":
        public_C = PAPER_C if options.C is None else options.C
        svm = train_kernel_svm(gaussian_kernel(scaled, scaled, width), y_public, public_C)
        return DpModel(
            method="public-only",
            mechanism="public",
            epsilon=None,
            private=True,
            basis=tuple(map(tuple, scaled.tolist())),
            dual_coef=tuple(svm.dual_coef.tolist()),
            training={"n_public": len(y_public), "seconds": time.perf_counter() - started},
            low=low_public,
            high=high_public,
            kernel_width=width,
            C=public_C,
        )
    if federation is None:
        raise ConfigError(f"{options.method} needs a federation of entities")
    if len(federation.column_blocks) != 1:
        raise ConfigError(
            f"{options.method} trains on row blocks that hold every feature (s = 1); "
            f"{federation.source} has {len(federation.column_blocks)} column blocks"
        )
    rho_info: dict[str, Any] = {}

    def frequencies_for(factor: float) -> np.ndarray:
        """rho for the median heuristic's width times ``factor``, from a generator seeded afresh (repeatable)."""
        rng = np.random.default_rng(options.seed)
        if options.method != "dp-hybrid":
            return random_frequencies(scaled.shape[1], options.n_frequencies, width * factor, rng)
        fit = learn_frequencies(scaled, width * factor, options.n_frequencies, rng)
        rho_info[f"{factor:g}"] = {
            "objective_start": fit.objective_start,
            "objective_end": fit.objective_end,
            "rho_iterations": fit.iterations,
            "rho_pairs": fit.n_pairs,
            "rho_seconds": fit.seconds,
        }
        return fit.rho

    with Session(federation, options.deadline) as session:
        metadata = session.load_metadata()
        wrong = {e: m.n_features for e, m in metadata.items() if m.n_features != scaled.shape[1]}
        if wrong:
            raise DataError(f"the public records have {scaled.shape[1]} features; entities {wrong} hold other counts")
        check_preflight(preflight(metadata, options), options)
        C, factor, rho, selection = _setting(options, scaled, y_public, frequencies_for, metadata)
        request = pb.DpRequest(
            method=options.method,
            mechanism=options.mechanism,
            epsilon=options.epsilon or 0.0,
            c=C,
            n_frequencies=options.n_frequencies,
            rho=rho.ravel().tolist(),
            low=low.tolist(),
            high=high.tolist(),
            huber_h=options.huber_h,
        )
        replies = session.each(lambda c: c.dp_weights(request))
        releases = [replies[e.id] for e in federation.entities]
        counts = np.array([r.n_train for r in releases], dtype=float)
        weights = np.average(np.array([list(r.weights) for r in releases]), axis=0, weights=counts)
        private = options.mechanism != NON_PRIVATE
        model = DpModel(
            method=options.method,
            mechanism=options.mechanism,
            epsilon=options.epsilon if private else None,
            private=private,
            rho=tuple(map(tuple, rho.tolist())),
            weights=tuple(weights.tolist()),
            entities=tuple(DpEntity(r.entity_id, int(r.n_train), r.noise) for r in releases),
            training={
                "n_public": len(y_public),
                "n_train": int(counts.sum()),
                **rho_info.get(f"{factor:g}", {}),
                **({"selection": selection} if selection else {}),
                "budget_remaining": {r.entity_id: r.budget_remaining for r in releases} if private else {},
            },
            low=low_public,
            high=high_public,
            kernel_width=width * factor,
            C=C,
        )
        if options.threshold_epsilon is not None:
            model = with_threshold(session, model, X_public, options.threshold_epsilon)
    return dataclasses.replace(model, training={**model.training, "seconds": time.perf_counter() - started})


# Refused unless forced: a release whose expected noise norm exceeds the bound sqrt(2C) on the weights.
NOISE_DOMINATES = 1.0


def preflight(metadata: Mapping[str, pb.BlockMetadata], options: DpOptions) -> dict[str, Any]:
    """What a DP training run will meet, from public facts only, before anything is computed or spent.

    Per entity: its mode (an entity serving the random-kernel protocol refuses weights), its budget left against
    what the run charges (epsilon + threshold epsilon), and the expected norm of its release's noise against
    the bound sqrt(2C) on the SVM's weights (:func:`ppsvm.core.dp.expected_noise_norm`), at the given C, or for
    C chosen by the noise rule at the smallest of the grid, where the ratio is lowest (the rule takes it when no
    C keeps the noise below half the bound).

    Parameters
    ----------
    metadata : mapping
        Entity id -> its BlockMetadata (records, mode, budget).
    options : DpOptions

    Returns
    -------
    dict
        "charge" (epsilon per entity), "C", and "entities": id -> n_train, mode, epsilon_left, noise_norm,
        weight_bound, noise_to_bound.
    """
    private = options.mechanism != NON_PRIVATE and options.epsilon is not None
    charge = (options.epsilon or 0.0) + (options.threshold_epsilon or 0.0) if private else 0.0
    C = options.C if options.C is not None else min(C_GRID)
    entities = {}
    for entity_id, m in sorted(metadata.items()):
        noise = expected_noise_norm(
            options.mechanism, C=C, n=int(m.n_train), n_frequencies=options.n_frequencies, epsilon=options.epsilon
        )
        entities[entity_id] = {
            "n_train": int(m.n_train),
            "mode": m.mode,
            "epsilon_left": max(m.epsilon_total - m.epsilon_spent, 0.0),
            "noise_norm": noise,
            "weight_bound": weight_bound(C),
            "noise_to_bound": noise / weight_bound(C),
        }
    return {"charge": charge, "C": C, "entities": entities}


def check_preflight(report: dict[str, Any], options: DpOptions) -> None:
    """Refuse, naming the entities, a run that an entity would refuse or whose noise is expected to dominate.

    Raises
    ------
    ConfigError
        An entity serves the random-kernel protocol only.
    PrivacyError
        An entity's budget left is below the charge.
    ConfigError
        The expected noise exceeds the weight bound at an entity (unless ``options.allow_noisy``).
    """
    entities = report["entities"]
    kernel_only = [e for e, facts in entities.items() if facts["mode"] == "random-kernel"]
    if kernel_only:
        raise ConfigError(
            f"entities {', '.join(kernel_only)} serve the random-kernel protocol and refuse DP weights; their owners "
            'would have to set [privacy] mode = "dp" (or "mixed")'
        )
    # The entities count in micro-epsilons; a hair's difference is theirs to judge.
    short = {e: f["epsilon_left"] for e, f in entities.items() if f["epsilon_left"] < report["charge"] - 1e-6}
    if report["charge"] and short:
        listed = ", ".join(f"{e} ({left:g} left)" for e, left in short.items())
        raise PrivacyError(
            f"this run charges epsilon {report['charge']:g} per entity (--epsilon plus --threshold-epsilon) and "
            f"entities {listed} have less: nothing was requested"
        )
    noisy = {e: f for e, f in entities.items() if f["noise_to_bound"] > NOISE_DOMINATES}
    if noisy and not options.allow_noisy:
        listed = ", ".join(
            f"{e} ({f['n_train']} records: noise {f['noise_norm']:.3g} vs weights <= {f['weight_bound']:.3g})"
            for e, f in noisy.items()
        )
        raise ConfigError(
            f"the {options.mechanism} release at epsilon {options.epsilon:g} and C = {report['C']:g} would be "
            f"mostly noise at {listed}: the model would classify little better than chance. Nothing was requested "
            "or spent. Raise --epsilon, lower --frequencies, give the entities more records, try "
            "--mechanism output-gamma, or pass --allow-noisy to release anyway"
        )


def dry_run(federation: Federation, options: DpOptions) -> dict[str, Any]:
    """:func:`preflight`'s report for ``options`` on the federation, with the verdict of :func:`check_preflight`:
    reads the public records and the entities' metadata, computes and spends nothing.

    Returns
    -------
    dict
        The report, plus "verdict": "would train" or the refusal's message.
    """
    X_public, _ = load_public(options.public)
    with Session(federation, options.deadline) as session:
        metadata = session.load_metadata()
    wrong = {e: m.n_features for e, m in metadata.items() if m.n_features != X_public.shape[1]}
    if wrong:
        raise DataError(f"the public records have {X_public.shape[1]} features; entities {wrong} hold other counts")
    report = preflight(metadata, options)
    try:
        check_preflight(report, options)
    except (ConfigError, PrivacyError) as refusal:
        return {**report, "verdict": str(refusal)}
    return {**report, "verdict": "would train"}


def _setting(
    options: DpOptions,
    scaled: np.ndarray,
    y_public: np.ndarray,
    frequencies_for: Callable[[float], np.ndarray],
    metadata: Mapping[str, pb.BlockMetadata],
) -> tuple[float, float, np.ndarray, dict[str, Any]]:
    """C, the width factor and rho, as given or chosen from public facts (:mod:`ppsvm.core.dp_selection`): C as
    the largest the expected noise allows (:func:`default_C`), the width by cross-validation on the public records
    with the release's noise simulated at the smallest entity's record count.

    Returns
    -------
    (C, width factor, rho (D, d), the selection's record; empty when nothing was chosen)
    """
    if options.C is not None and options.width_factor is not None:
        return options.C, options.width_factor, frequencies_for(options.width_factor), {}
    smallest = min(int(m.n_train) for m in metadata.values())
    release = simulated_release(options.mechanism, smallest, options.n_frequencies, options.epsilon)

    def noise_norm(C: float) -> float:
        return expected_noise_norm(
            options.mechanism, C=C, n=smallest, n_frequencies=options.n_frequencies, epsilon=options.epsilon
        )

    # C from public facts (the largest the expected noise allows): cross-validating it on a few dozen public
    # records chose worse than this rule on Adult (dp_selection's notes); the width is cross-validated.
    C = default_C(C_GRID, noise_norm) if options.C is None else options.C
    default = (C, DEFAULT_FACTOR)
    choice = select_c_and_width(
        scaled,
        y_public,
        frequencies_for,
        release,
        np.random.default_rng([options.seed, SELECTION_STREAM]),
        C_grid=(C,),
        width_factors=WIDTH_FACTORS if options.width_factor is None else (options.width_factor,),
        default=default,
    )
    logger.info("chose C = %g and %g x the median-heuristic width on the public records", choice.C, choice.width_factor)
    record = {
        "C": choice.C,
        "C_rule": "given" if options.C is not None else f"largest expected noise norm <= {NOISE_TO_BOUND:g} sqrt(2C)",
        "width_factor": choice.width_factor,
        "mean_auc": choice.scores,
        "simulated_n": smallest,
    }
    return choice.C, choice.width_factor, choice.rho, record


def with_threshold(session: Session, model: DpModel, X_public: np.ndarray, epsilon: float) -> DpModel:
    """The model with the threshold the entities' noised score histograms choose (:mod:`ppsvm.core.threshold`).

    Parameters
    ----------
    session : Session
        Open on the entities that released the weights.
    model : DpModel
        Threshold 0.
    X_public : ndarray, shape (k, d)
        The public records, whose scores place the bin edges.
    epsilon : float
        Each entity's histogram release.

    Returns
    -------
    DpModel
        With ``threshold`` set and what chose it under ``training["threshold"]``.
    """
    smallest = min(e.n_train for e in model.entities)
    count = threshold_edge_count(smallest, epsilon)
    edges = threshold_edges(model.decision(X_public), float(np.linalg.norm(model.weights)), count)
    text, bounds = model.to_json(), edges.tolist()
    replies = session.each(lambda c: c.dp_score_histogram(text, bounds, epsilon))
    negative = np.sum([np.asarray(r.negative_counts, dtype=np.int64) for r in replies.values()], axis=0)
    positive = np.sum([np.asarray(r.positive_counts, dtype=np.int64) for r in replies.values()], axis=0)
    # Each summed count carries the noise of every entity's.
    noise = count_noise_std(epsilon) * math.sqrt(len(replies))
    choice = choose_threshold(edges, negative, positive, noise, zero_margin_stds(smallest, epsilon))
    logger.info(
        "threshold %.6g chosen from the entities' score histograms (epsilon %g each): %d of about %d noised "
        "training records misclassified",
        choice.threshold,
        epsilon,
        choice.errors,
        choice.records,
    )
    training = {
        **model.training,
        "threshold": {
            "rule": "fewest training errors by the entities' per-class score histograms (discrete Laplace)",
            "epsilon": epsilon,
            "bins": len(edges) + 1,
            "noised_training_errors": choice.errors,
            "noised_training_records": choice.records,
        },
        "budget_remaining": {r.entity_id: r.budget_remaining for r in replies.values()},
    }
    return dataclasses.replace(model, threshold=choice.threshold, training=training)


def train_dp_and_save(federation: Federation | None, options: DpOptions, model_out: Path) -> DpModel:
    """Train, write the model atomically, then send it to every entity."""
    model = train_dp(federation, options)
    model.save(model_out)
    logger.info("model written to %s", model_out)
    if options.distribute and federation is not None:
        distribute(federation, model.to_json(), model_out, options.deadline)
    return model
