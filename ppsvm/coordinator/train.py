"""``ppsvm coordinator train``: assemble K(A, B') from the entities, tune, solve the LP, write the model."""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ppsvm.config import Federation
from ppsvm.constants import (
    DEFAULT_DASK_WORKERS,
    DEFAULT_DEADLINE_S,
    DEFAULT_FOLDS,
    ENGINES,
    MAX_BASIS_POINTS,
    REFERENCE_ROW_FRACTION,
    TASKS,
)
from ppsvm.coordinator.federation import RowBlockRecords, Session
from ppsvm.core.calibration import Platt, calibration_record, fit_platt, out_of_fold_decisions
from ppsvm.core.kernels import KERNELS, KernelName, product_columns, rescale_gaussian
from ppsvm.core.lp import DEFAULT_FORMULATION, FORMULATIONS, Formulation, LPSolution, Task, solve_lp
from ppsvm.core.model import ColumnScaling, Model, ModelEntity
from ppsvm.core.multiclass import MulticlassModel
from ppsvm.core.privacy import NOT_PRIVATE_BANNER, default_mbar
from ppsvm.core.tuning import (
    SEARCHES,
    FoldRunner,
    Search,
    cross_validation_rows,
    fits_here,
    tune_search,
)
from ppsvm.errors import ConfigError, DataError, EntityError, PrivacyError, SolverError
from ppsvm.memory import process_memory_mib, release_free_memory
from ppsvm.progress import EtaLog
from ppsvm.wire.certs import dask_cluster_certificates, dask_cluster_files, issued_by, write_certificates
from ppsvm.wire.tls import TlsFiles

if TYPE_CHECKING:
    from distributed import Client

    from ppsvm.core.dask_engine import DaskKernel

logger = logging.getLogger(__name__)

# "paper": B = [B_1 ... B_s], mbar points. "product": points from the Cartesian product of the
# B_j's rows, formed by the coordinator from the same blocks (see ppsvm.core.kernels.product_columns).
# "auto": whichever cross-validates better on those blocks (no new request either way).
BASES = ("auto", "paper", "product")


@dataclass(frozen=True)
class TrainOptions:
    """Settings of one training run; None means "auto" (chosen or tuned by the coordinator).

    Attributes
    ----------
    mbar : int or None
        Random points per column block. Auto: the papers' rule min(n_j) - 1, capped at 10% of the training rows.
    nu, mu : float or None
        Auto: k-fold cross-validation on the assembled kernel (mu through the power identity).
    basis : {"auto", "paper", "product"}
        "product" adds kernel columns that pair rows of different B_j's, up to 10% of the
        training rows in all (the pooled reference's basis size, at most MAX_BASIS_POINTS); its
        columns cannot be formed from masked shares, so it asks every entity for its block on its own,
        which an entity with column-block peers releases only within its measured risk or with its
        consent (privacy rule 8). "auto" (default) is the paper's basis, combined by secure aggregation.
    search : {"grid", "uniform-design"}
        How "auto" nu and mu are searched: the full grid (default) or the papers' nested uniform design
        (:func:`ppsvm.core.tuning.tune_uniform_design`).
    advice : {"cli", "api"}
        Whether advice names command-line flags or the estimators' parameters.
    class_weight : {None, "balanced"}
        Classification: "balanced" weighs each training record's error term by m / (2 x its class's count) in each
        binary LP (each one-vs-rest LP of a multiclass model), so both classes weigh the same in all.
    sample_weight : mapping of str to float, optional
        Each training record's weight (> 0) by record id (pseudonym): the Python API's ``fit(sample_weight=)``;
        multiplied by the class weights.
    engine : {"numpy", "dask"}
        "dask" streams K's rows from the entities into chunks on Dask workers and solves the LP there (the
        interior-point method, its products reduced on the workers); the cross-validation and the calibration run
        here on their bounded sample of rows (at most :func:`ppsvm.core.tuning.tuning_row_limit`), gathered.
    dask_scheduler : str or None
        The address of a running Dask scheduler (tls://host:port) for "dask"; None starts a cluster of
        ``dask_workers`` worker processes on this machine, over mutual TLS from a CA made for it alone.
    dask_workers : int
        Worker processes of that local cluster.
    dask_tls : Path or None
        A named scheduler's cluster certificates (``ppsvm coordinator dask-certs``): a CA of the cluster's own, never
        the federation's. Required with ``dask_scheduler``, refused without it.
    """

    task: Task = "classify"
    kernel: KernelName = "gaussian"
    mbar: int | None = None
    nu: float | None = None
    mu: float | None = None
    folds: int = DEFAULT_FOLDS
    seed: int = 0
    formulation: Formulation = DEFAULT_FORMULATION
    deadline: float = DEFAULT_DEADLINE_S
    distribute: bool = True
    basis: str = "auto"
    search: Search = "grid"
    advice: str = "cli"
    class_weight: str | None = None
    sample_weight: Mapping[str, float] | None = None
    engine: str = "numpy"
    dask_scheduler: str | None = None
    dask_workers: int = DEFAULT_DASK_WORKERS
    dask_tls: Path | None = None

    def __post_init__(self) -> None:
        self._check_engine()
        if self.basis not in BASES:
            raise ConfigError(f"basis must be one of {', '.join(BASES)}, got {self.basis!r}")
        if self.class_weight not in (None, "balanced"):
            raise ConfigError(f"class_weight must be 'balanced' or none, got {self.class_weight!r}")
        if self.class_weight is not None and self.task != "classify":
            raise ConfigError("class_weight applies to classification; a regression has no classes")
        if self.advice not in ("cli", "api"):
            raise ConfigError(f"advice must be 'cli' or 'api', got {self.advice!r}")
        if self.search not in SEARCHES:
            raise ConfigError(f"search must be one of {', '.join(SEARCHES)}, got {self.search!r}")
        if self.task not in TASKS:
            raise ConfigError(f"task must be 'classify' or 'regress', got {self.task!r}")
        if self.kernel not in KERNELS:
            raise ConfigError(f"kernel must be one of {', '.join(KERNELS)}, got {self.kernel!r}")
        if self.formulation not in FORMULATIONS:
            raise ConfigError(f"LP formulation must be one of {', '.join(FORMULATIONS)}, got {self.formulation!r}")
        if self.mbar is not None and (not isinstance(self.mbar, int) or isinstance(self.mbar, bool) or self.mbar < 1):
            raise ConfigError(f"mbar must be a whole number >= 1 or 'auto', got {self.mbar!r}")
        for name in ("nu", "mu"):
            value = getattr(self, name)
            if value is None:
                continue
            if (
                not isinstance(value, (int, float))
                or isinstance(value, bool)
                or not (math.isfinite(value) and value > 0)
            ):
                raise ConfigError(f"{name} must be a number > 0 or 'auto', got {value!r}")
        if self.folds < 2:
            raise ConfigError(f"folds must be >= 2, got {self.folds}")

    def _check_engine(self) -> None:
        if self.engine not in ENGINES:
            raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        if self.engine != "dask":
            if self.dask_scheduler is not None or self.dask_tls is not None:
                raise ConfigError(
                    "a Dask scheduler or its certificates were named but the engine is numpy: add --engine dask"
                )
            return
        if self.dask_scheduler is not None and self.dask_tls is None:
            raise ConfigError(
                f"the Dask scheduler {self.dask_scheduler}: its workers would hold kernel rows, so the cluster needs "
                "certificates from a CA of its own: make them with `ppsvm coordinator dask-certs --out DIR`, start "
                "the scheduler and workers with them and pass --dask-tls DIR"
            )
        if self.dask_scheduler is None and self.dask_tls is not None:
            raise ConfigError(
                "--dask-tls names a running cluster's certificates, but no --dask-scheduler was given: the local "
                "cluster makes a CA of its own for each training"
            )
        if isinstance(self.dask_workers, bool) or not isinstance(self.dask_workers, int) or self.dask_workers < 1:
            raise ConfigError(f"dask_workers must be a whole number >= 1, got {self.dask_workers!r}")
        if self.basis == "product":
            raise ConfigError(
                "the Dask engine streams the paper's basis (masked shares summed chunk by chunk); the product basis "
                "is formed from single blocks in this process: use the numpy engine for it"
            )
        if self.formulation not in ("auto", "ipm"):
            raise ConfigError(
                f"the Dask engine solves by the interior-point method (formulation ipm or auto), not "
                f"{self.formulation!r}"
            )


# Fewer random points than this make a weak Gaussian basis: with 5 or 2 of them a 3-hospital test model was worse
# than each hospital alone (error 0.296 against 0.211, issue 17), where a linear kernel beat them (0.204).
FEW_BASIS_POINTS = 10


def product_point_count(n_train: int) -> int:
    """The product basis's points: as many as the pooled reference's, a share of the training rows."""
    return min(math.ceil(REFERENCE_ROW_FRACTION * n_train), MAX_BASIS_POINTS)


def _candidate_bases(basis: str, n_column_blocks: int) -> tuple[str, ...]:
    """The bases to compare. "auto" is the paper's basis: the product basis needs every entity's block on its own
    (its columns pair different rows of the B_j's, which masked shares cannot), which entities release only
    within their measured-risk limit or with their consent (privacy rule 8); with one column block the two
    coincide."""
    if basis == "auto" or (basis == "product" and n_column_blocks == 1):
        return ("paper",)
    return (basis,)


def _basis_warnings(
    kernel: str, basis: str, mbar: int, widths: list[int], n_train: int, product_tried: bool, advice: str = "cli"
) -> list[str]:
    """What to tell a user whose Gaussian model will have few kernel columns, with the private alternatives, in the
    words of the command line (``advice="cli"``) or of the estimators ("api")."""
    if kernel != "gaussian" or basis != "paper" or mbar >= FEW_BASIS_POINTS:
        return []
    cli = advice == "cli"
    narrowest = min(widths)
    alternatives = [
        "--kernel linear (each block's columns are summed, so the width limit does not bind; once the entities have "
        "pinned the Gaussian view it needs a new basis epoch, `ppsvm entity epoch --next` at every member, and the "
        "points of all epochs count together: plan with `coordinator train --dry-run`)"
        if cli
        else "kernel='linear' (each block's columns are summed, so the width limit does not bind)"
    ]
    if len(widths) > 1 and not product_tried:
        alternatives.insert(
            0,
            f"{'--basis product' if cli else 'basis=' + repr('product')} (up to {product_point_count(n_train)} "
            "columns pairing rows of different B_j's; it needs each entity's block on its own, which an entity "
            "releases only within its measured-risk limit or with its own consent)",
        )
    compare = "`ppsvm coordinator baselines`" if cli else "the same estimator on one site's rows"
    return [
        f"the Gaussian model gets mbar = {mbar} random points per column block: privacy rule 3 (mbar < n_j) "
        f"allows at most {narrowest - 1} because the narrowest column block has {narrowest} features, and so few "
        f"kernel columns often classify worse than each entity alone (compare with {compare}). "
        "Private alternatives: " + "; ".join(alternatives)
    ]


def train(federation: Federation, options: TrainOptions) -> Model | MulticlassModel:
    """Train a random-kernel model over the federation's entities.

    Labels of three or more classes (whole numbers) give a one-vs-rest :class:`MulticlassModel` whose classes are
    all solved on one fetched kernel.

    Returns
    -------
    Model or MulticlassModel
        Not yet written or distributed (see :func:`train_and_save`).

    Raises
    ------
    EntityError, DataError, PrivacyError, SolverError
        Naming the entity, record or setting at fault.
    """
    started = time.perf_counter()
    with Session(federation, options.deadline) as session, _workers(options, session.tls) as client:
        logger.info("training run %s (the entities' release logs record it with each release)", session.run_id)
        run_id = session.run_id
        blocks, scaling = session.survey()
        surveyed = time.perf_counter()
        fingerprint = session.fingerprint()
        labels, classes, names = None, None, None
        if options.task == "classify":
            classes = _check_labels(session, blocks)
            declared = declared_labels(session)
            if classes is None and declared is not None and len(declared) > 2:
                raise DataError(
                    f"the label holders name {len(declared)} classes (label_names), but their training labels are "
                    "-1 and +1; write class codes 0 .. k-1 for several classes"
                )
            labels = None if declared is None else (declared[0], declared[1])
            # Named before any kernel is fetched: codes the names do not reach are refused before a release.
            names = None if classes is None else _class_names(classes, declared)
        widths = [session.n_features(j) for j in federation.column_blocks]
        n_train = sum(b.size("train") for b in blocks)
        record_weights = None if options.sample_weight is None else _record_weights(options.sample_weight, blocks)
        # The ids are not needed past the survey and are the largest thing held then (122 MiB at 1,000,000
        # records). glibc keeps freed pages resident: without the trim a second training in the same process
        # (the prediction service, a benchmark's repeat) met the kernel fetch with them still counted.
        blocks = [b.without_ids() for b in blocks]
        release_free_memory()
        mbar = options.mbar if options.mbar is not None else default_mbar(widths, n_train)
        private = check_privacy(session, mbar, widths)
        candidates = _candidate_bases(options.basis, len(widths))
        # Gaussian blocks are fetched once at the one width entities pin (Session.fetch_width);
        # every width tuning tries, and the final one, is a power of it.
        mu_fetch = session.fetch_width("gaussian")
        columns = None
        if "product" in candidates:
            # Its first mbar columns are the paper's basis, so one fetch serves both candidates.
            columns = product_columns(mbar, len(widths), product_point_count(n_train), options.seed)
            logger.info("product basis: %d points from %d rows of each of %d B_j", len(columns), mbar, len(widths))
        fetch_started = time.perf_counter()
        fetch_mu = mu_fetch if options.kernel == "gaussian" else 0.0
        K: np.ndarray | DaskKernel = (
            session.kernel(options.kernel, mbar, fetch_mu, scaling, blocks, "train", columns)
            if client is None
            else session.kernel_on_workers(client, options.kernel, mbar, fetch_mu, scaling, blocks, "train")
        )
        fetch_seconds = time.perf_counter() - fetch_started
        target = np.concatenate([b.train_labels for b in blocks])
        del blocks
        shared = _Shared(options, mbar, widths, n_train, mu_fetch, candidates, record_weights)
        with contextlib.nullcontext() if isinstance(K, np.ndarray) else contextlib.closing(K):
            if classes is None:
                fits = [_fit(K, columns, target, shared)]
            else:
                assert names is not None  # named with the classes, above
                fits = []
                width = mu_fetch  # a Gaussian K's width as it stands
                for k, (value, name) in enumerate(zip(classes, names, strict=True)):
                    logger.info("class %s against the rest (%d of %d)", name, k + 1, len(classes))
                    # Each fit rescales its K in place: the last class may take the fetched one itself. K on workers
                    # is not copied: each class rescales it from the width the last one left (the power identity).
                    own = K if k == len(classes) - 1 or not isinstance(K, np.ndarray) else K.copy(order="K")
                    signs = np.where(target == value, 1.0, -1.0)
                    fits.append(
                        _fit(
                            own,
                            columns,
                            signs,
                            shared,
                            advise=k == 0,
                            width=None if isinstance(own, np.ndarray) else width,
                        )
                    )
                    width = fits[-1].mu or width
            workers = None if isinstance(K, np.ndarray) else K.worker_memory()
    # Where the time went: the survey (metadata, records, ranges), the kernel fetch, the LP.
    timing = {
        "run_id": run_id,
        "survey_seconds": surveyed - started,
        "fetch_seconds": fetch_seconds,
        "engine": options.engine,
        # This process's peak resident memory (MiB) up to the LP's end; the Dask workers' with their rows of K.
        "peak_rss_mib": process_memory_mib().get("VmHWM"),
        **({} if workers is None else {"dask_workers": workers}),
    }
    model_of = functools.partial(
        _model,
        options=options,
        mbar=mbar,
        private=private,
        scaling=scaling,
        entities=tuple(ModelEntity(e.id, e.row_block, e.column_block) for e in federation.entities),
        fingerprint=fingerprint,
        timing=timing,
        n_train=n_train,
        widths=widths,
    )
    if classes is None:
        return model_of(fits[0], labels=labels, seconds=time.perf_counter() - started)
    assert names is not None
    return MulticlassModel(
        classes=names,
        values=tuple(float(value) for value in classes),
        members=tuple(
            model_of(fit, labels=("rest", name), seconds=None) for fit, name in zip(fits, names, strict=True)
        ),
        training={
            **timing,
            "n_train": int(n_train),
            "lp_seconds": sum(fit.solution.seconds for fit in fits),
            "seconds": time.perf_counter() - started,
        },
    )


@dataclass(frozen=True)
class _Shared:
    """What every class's fit on one fetched kernel shares."""

    options: TrainOptions
    mbar: int
    widths: list[int]
    n_train: int
    mu_fetch: float
    candidates: tuple[str, ...]
    record_weights: np.ndarray | None  # shape (m,), the training rows' sample weights


@dataclass(frozen=True)
class _Fit:
    """One binary LP's outcome on the fetched kernel."""

    nu: float
    mu: float
    basis: str
    columns: np.ndarray | None
    solution: LPSolution
    tuning: dict[str, Any] | None
    warnings: list[str]
    calibration: Platt | None
    calibration_report: dict[str, Any] | None


def _fit(
    K: np.ndarray | DaskKernel,
    columns: np.ndarray | None,
    target: np.ndarray,
    shared: _Shared,
    advise: bool = True,
    width: float | None = None,
) -> _Fit:
    """Tune (where asked), choose the basis, solve the LP and calibrate, on the fetched K (Gaussian: at ``width``,
    by default ``shared.mu_fetch``), which is rescaled in place to the chosen width. ``target`` (m,): +-1 or real
    targets. ``advise``: log the basis advice (once per run: every class of a multiclass run has the same basis).

    K on Dask workers is cross-validated and calibrated on the sample of rows both would draw from an array
    (:func:`_cross_validation_rows`), gathered here; the fold fits run as tasks on the workers, the LP on their
    chunks."""
    options, mbar, candidates = shared.options, shared.mbar, shared.candidates
    mu_fetch = shared.mu_fetch if width is None else width
    weights = row_weights(target, options.class_weight, shared.record_weights)
    sample: tuple[np.ndarray, np.ndarray, np.ndarray | None] | None = None
    runner: FoldRunner = fits_here
    if not isinstance(K, np.ndarray):
        from ppsvm.core.dask_engine import fits_on

        sample, runner = _cross_validation_rows(K, target, weights, options), fits_on(K.client)
    nu, mu, tuning, basis = options.nu, options.mu, None, candidates[0]
    needs_tuning = nu is None or (mu is None and options.kernel == "gaussian")
    if needs_tuning or len(candidates) > 1:
        results = {}
        for candidate in candidates:
            logger.info("tuning by %s with the %s basis, %d folds", options.search, candidate, options.folds)
            if sample is not None:
                K_tune, target_tune, weights_tune = sample
            else:
                assert isinstance(K, np.ndarray)
                K_tune = K[:, :mbar] if candidate == "paper" and columns is not None else K
                target_tune, weights_tune = target, weights
            results[candidate] = tune_search(
                options.task,
                options.kernel,
                K_tune,
                target_tune,
                search=options.search,
                n_features=sum(shared.widths),
                nu=nu,
                mu=mu,
                mu_ref=mu_fetch,
                folds=options.folds,
                seed=options.seed,
                formulation=options.formulation,
                progress=EtaLog(logger, f"cross-validation, {candidate} basis (fold fits)"),
                weights=weights_tune,
                runner=runner,
            )
        # Ties go to the paper's basis: the method as published.
        basis = min(candidates, key=lambda name: (results[name].score, name != "paper"))
        result = results[basis]
        nu, mu = result.nu, (result.mu if options.kernel == "gaussian" else None)
        tuning = {
            "search": options.search,
            "folds": options.folds,
            "seed": options.seed,
            "rows": result.rows,
            "promoted": result.promoted,
            "score": result.score,
            "grid": [list(point) for point in result.scores],
            **({"basis_scores": {name: r.score for name, r in results.items()}} if len(results) > 1 else {}),
        }
        logger.info(
            "chose nu = %g%s%s (cross-validated %s %.4f on %d of %d rows; %d of %d grid points on all folds)",
            nu,
            f", mu = {mu:g}" if mu else "",
            f", the {basis} basis" if len(results) > 1 else "",
            "error rate" if options.task == "classify" else "relative error",
            result.score,
            result.rows,
            len(target),
            result.promoted,
            len(result.scores),
        )
    if basis == "paper" and columns is not None:
        assert isinstance(K, np.ndarray)  # the Dask engine has no product basis
        K, columns = np.asfortranarray(K[:, :mbar]), None
    warnings = _basis_warnings(
        options.kernel, basis, mbar, shared.widths, shared.n_train, "product" in candidates, options.advice
    )
    for warning in warnings if advise else ():
        logger.warning("%s", warning)
    assert nu is not None
    if options.kernel == "gaussian":
        assert mu is not None
        if isinstance(K, np.ndarray):
            K = rescale_gaussian(K, mu_fetch, mu, in_place=True)
        else:
            K.power(mu / mu_fetch)
        if sample is not None:
            sample = (rescale_gaussian(sample[0], mu_fetch, mu, in_place=True), *sample[1:])
    release_free_memory()  # the LP's vectors are next: as large as what the fetch and tuning freed
    solution = solve_lp(options.task, K, target, nu, options.formulation, weights)
    logger.info(
        "LP solved: %d x %d kernel, objective %.6g, %s, %d iterations in %.2f s%s",
        K.shape[0],
        K.shape[1],
        solution.objective,
        solution.formulation,
        solution.iterations,
        solution.seconds,
        "" if solution.certificate is None else f", relative duality gap {solution.certificate.gap:.1e}",
        extra={"duration_ms": round(solution.seconds * 1000, 3)},
    )
    calibration, report = None, None
    if options.task == "classify":
        K_cal, target_cal, weights_cal = (K, target, weights) if sample is None else sample
        assert isinstance(K_cal, np.ndarray)
        calibration, report = calibrate(K_cal, target_cal, nu, options, weights_cal, solution)
    return _Fit(
        float(nu),
        float(mu) if options.kernel == "gaussian" and mu is not None else 0.0,
        basis,
        columns,
        solution,
        tuning,
        warnings,
        calibration,
        report,
    )


def _cross_validation_rows(
    K: DaskKernel, target: np.ndarray, weights: np.ndarray | None, options: TrainOptions
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The rows of K on workers the cross-validation and the calibration read, gathered here, with their targets
    and weights: :func:`ppsvm.core.tuning.cross_validation_rows`, the rows both read of an array K (same seed),
    so the two engines choose and calibrate alike.

    Returns
    -------
    (ndarray of shape (k, mbar), ndarray of shape (k,), ndarray of shape (k,) or None)
    """
    rows = cross_validation_rows(options.task, target, K.shape[1], options.seed)
    logger.info("gathering %d of K's %d rows from the Dask workers for the cross-validation", len(rows), len(target))
    return K.take(rows), target[rows], None if weights is None else weights[rows]


@contextlib.contextmanager
def _workers(options: TrainOptions, tls: TlsFiles | None) -> Iterator[Client | None]:
    """The Dask cluster of the "dask" engine (None for numpy), over mutual TLS from a CA of the cluster's own.

    Dask accepts any certificate its CA signed, whatever its name or role, so under the federation's CA an
    entity's or a prediction client's certificate would open the workers and their kernel rows. A local cluster's
    CA is made for it alone, in a private temporary directory removed afterwards; a named scheduler's comes from
    ``options.dask_tls`` and is refused where the federation's CA issued it.
    """
    if options.engine != "dask":
        yield None
        return
    try:
        from ppsvm.core.dask_engine import cluster, tls_security
    except ImportError as error:
        raise ConfigError(f"the Dask engine: {error}") from None
    if options.dask_tls is not None:
        files = dask_cluster_files(options.dask_tls)
        security = tls_security(*files)  # names a missing file first
        _refuse_federation_ca(files, tls)
        with cluster(options.dask_scheduler, options.dask_workers, security) as client:
            yield client
        return
    with tempfile.TemporaryDirectory(prefix="ppsvm-dask-tls-") as private:
        write_certificates(Path(private), dask_cluster_certificates(), overwrite=False)
        with cluster(None, options.dask_workers, tls_security(*dask_cluster_files(Path(private)))) as client:
            yield client


def _refuse_federation_ca(files: tuple[Path, Path, Path], tls: TlsFiles | None) -> None:
    """A named cluster's CA or certificate must not come from the federation's CA (see :func:`_workers`)."""
    if tls is None:
        return
    federation_ca = tls.read()[0]  # names the [tls] file it cannot read
    try:
        shared = any(issued_by(path.read_bytes(), federation_ca) for path in files[:2])
    except ValueError as error:
        raise ConfigError(
            f"the Dask cluster's certificates in {files[0].parent}: not a PEM certificate ({error})"
        ) from None
    if shared:
        raise ConfigError(
            f"the Dask cluster's certificates in {files[0].parent} come from the federation's CA ({tls.ca}): the "
            "cluster would admit every entity's and prediction client's certificate, and a Dask client can run "
            "code on the workers that hold kernel rows. Make the cluster a CA of its own with `ppsvm coordinator "
            "dask-certs --out DIR`"
        )


def _model(
    fit: _Fit,
    *,
    options: TrainOptions,
    mbar: int,
    private: bool,
    scaling: tuple[ColumnScaling, ...],
    entities: tuple[ModelEntity, ...],
    fingerprint: str,
    timing: dict[str, Any],
    n_train: int,
    widths: list[int],
    labels: tuple[str, str] | None,
    seconds: float | None,
) -> Model:
    """The model file of one fit (a binary or regression model, or one class of a multiclass model)."""
    solution = fit.solution
    return Model(
        task=options.task,
        kernel=options.kernel,
        mu=fit.mu,
        nu=fit.nu,
        mbar=mbar,
        u=tuple(solution.u.tolist()),
        gamma=solution.gamma,
        private=private,
        scaling=scaling,
        entities=entities,
        columns=None if fit.columns is None else tuple(map(tuple, fit.columns.tolist())),
        federation=fingerprint,
        labels=labels,
        calibration=fit.calibration,
        training={
            "n_train": int(n_train),
            "n_features": widths,
            "basis": fit.basis,
            "formulation": solution.formulation,
            "objective": solution.objective,
            **timing,
            "lp_seconds": solution.seconds,
            "lp_iterations": solution.iterations,
            "lp_certificate": None if solution.certificate is None else solution.certificate.as_dict(),
            **({"seconds": seconds} if seconds is not None else {}),
            "tuning": fit.tuning,
            **({"class_weight": options.class_weight} if options.class_weight else {}),
            **({"sample_weight": True} if options.sample_weight is not None else {}),
            **({"calibration": fit.calibration_report} if fit.calibration_report else {}),
            **({"warnings": fit.warnings} if fit.warnings else {}),
        },
    )


def row_weights(target: np.ndarray, class_weight: str | None, record_weights: np.ndarray | None) -> np.ndarray | None:
    """The LP's per-row weights, shape (m,): "balanced" class weights m / (2 n_class) of a +-1 ``target`` (m,), times
    the records' own weights; None when neither is asked for (every row weighs 1)."""
    if class_weight is None:
        return record_weights
    positive = target > 0
    counts = np.array([np.count_nonzero(~positive), np.count_nonzero(positive)])
    balanced = (len(target) / (2.0 * counts))[positive.astype(np.int64)]
    return balanced if record_weights is None else balanced * record_weights


def _record_weights(sample_weight: Mapping[str, float], blocks: list[RowBlockRecords]) -> np.ndarray:
    """The training rows' sample weights in the order of K's rows, shape (m,); DataError naming a record without
    one, or a weight that is not a finite number > 0."""
    ids = [record for block in blocks for record in block.train_ids.tolist()]
    missing = [record for record in ids if record not in sample_weight]
    if missing:
        raise DataError(f"sample_weight has no weight for {len(missing)} training record(s), e.g. {missing[:3]}")
    weights = np.array([sample_weight[record] for record in ids], dtype=np.float64)
    bad = np.flatnonzero(~(np.isfinite(weights) & (weights > 0)))
    if bad.size:
        raise DataError(f"sample weights must be finite and > 0: record {ids[bad[0]]!r} has {weights[bad[0]]!r}")
    return weights


def _class_names(classes: np.ndarray, declared: tuple[str, ...] | None) -> tuple[str, ...]:
    """Each class's name, shape (k,): the label holders' ``label_names`` entry for its code, else its code.

    Raises
    ------
    DataError
        A code that the declared names do not reach.
    """
    if declared is None:
        return tuple(str(int(value)) for value in classes)
    missing = [int(value) for value in classes if not 0 <= value < len(declared)]
    if missing:
        raise DataError(
            f"the label holders' label_names name {len(declared)} classes (codes 0 .. {len(declared) - 1}), but "
            f"the training labels hold code {missing[0]}"
        )
    return tuple(declared[int(value)] for value in classes)


def _check_labels(session: Session, blocks: list[RowBlockRecords]) -> np.ndarray | None:
    """Two classes: labels in {-1, +1}, both among the training records (returns None). Several: whole numbers
    with three or more values among the training records (returns them sorted, shape (k,): one-vs-rest)."""
    # Comparisons, not np.unique: a sort of a million labels is 60 ms, for a check that is nearly always clean.
    unsigned = [b.row_block for b in blocks if ((b.train_labels != 1.0) & (b.train_labels != -1.0)).any()]
    if unsigned:
        values = np.unique(np.concatenate([b.train_labels for b in blocks]))
        if len(values) >= 3 and np.all(values == np.round(values)):
            return values
        odd = values[(values != 1.0) & (values != -1.0)]
        holders = [e.id for i in unsigned for e in session.row_block(i) if session.metadata[e.id].has_labels]
        raise DataError(
            f"row block {', '.join(map(str, unsigned))} (labels from entity {', '.join(holders)}): classification "
            "needs labels -1 and +1 (two classes) or whole numbers, one per class (three or more); got "
            f"{odd[:5].tolist()} among {values[:8].tolist()}"
        )
    if not all(any((b.train_labels == label).any() for b in blocks) for label in (-1.0, 1.0)):
        label = next(b.train_labels[0] for b in blocks if b.train_labels.size)
        raise DataError(f"every training record has label {label:+g}: classification needs both classes")
    return None


def declared_labels(session: Session) -> tuple[str, ...] | None:
    """The (negative, positive) label values the label holders declare, or with three or more each class code's
    name; None when they declare none (the labels are their values).

    Raises
    ------
    DataError
        Label holders that declare different values (or some none): a model predicts one set of labels.
    """
    declared = {
        e.id: tuple(session.metadata[e.id].label_names)
        for e in session.federation.entities
        if session.metadata[e.id].has_labels
    }
    kinds = set(declared.values())
    if len(kinds) > 1:
        shown = "; ".join(
            f"{entity}: "
            + (
                f"negative {names[0]!r}, positive {names[1]!r}"
                if len(names) == 2
                else f"classes {', '.join(map(repr, names))}"
                if names
                else "their label values"
            )
            for entity, names in sorted(declared.items())
        )
        raise DataError(f"the label holders declare different labels ([data] labels in their configs): {shown}")
    names = next(iter(kinds), ())
    return names if len(names) >= 2 else None


def calibrate(
    K: np.ndarray,
    target: np.ndarray,
    nu: float,
    options: TrainOptions,
    weights: np.ndarray | None,
    solution: LPSolution,
) -> tuple[Platt | None, dict[str, Any]]:
    """Platt scaling of out-of-fold decision values on the model's kernel (:mod:`ppsvm.core.calibration`).

    The folds are fitted with the model's row ``weights``; the sigmoid itself is fitted unweighted, so that the
    probabilities follow how often each class really occurs, whatever weights moved the decision boundary. A class
    too small to leave a fold (one record) has no out-of-fold values: the sigmoid is then fitted on the model's own
    decision values (``solution``), which overstate its confidence, and the report says "in_sample".

    Returns the calibration and what the model file records of it; (None, report with the reason) when it cannot
    be fitted at all (a fold's LP without an optimum): the model still stands.
    """
    started = time.perf_counter()
    in_sample = None
    try:
        try:
            rows, decisions = out_of_fold_decisions(
                "classify",
                K,
                target,
                nu,
                folds=options.folds,
                seed=options.seed,
                formulation=options.formulation,
                weights=weights,
            )
        except ValueError as error:  # a fold without one of the classes
            in_sample = str(error)
            rows, decisions = np.arange(len(target)), K @ solution.u - solution.gamma
        labels = target[rows]
        platt = fit_platt(decisions, labels)
    except (ValueError, SolverError) as error:
        logger.warning("no probability calibration: %s; the model predicts labels without probabilities", error)
        return None, {"method": "none", "reason": str(error)}
    report = {
        **calibration_record(platt, decisions, labels, float(np.mean(target > 0))),
        **({"folds": min(options.folds, len(rows))} if in_sample is None else {"in_sample": in_sample}),
        "seconds": time.perf_counter() - started,
    }
    if in_sample is not None:
        logger.warning("probabilities calibrated on the training records' own decision values (%s)", in_sample)
    logger.info(
        "probabilities calibrated by Platt scaling on %d out-of-fold decision values in %.2f s: Brier score %.4f "
        "(%.4f for the class frequency)",
        report["rows"], report["seconds"], report["brier"], report["brier_class_frequency"],
    )  # fmt: skip
    return platt, report


def check_privacy(session: Session, mbar: int, widths: list[int]) -> bool:
    """Refuse early (before any kernel is computed) when an entity would refuse mbar; False if not private."""
    private = True
    for j, width in zip(session.federation.column_blocks, widths, strict=True):
        if mbar < width:
            continue
        private = False
        refusing = [e.id for e in session.column_block(j) if not session.metadata[e.id].non_private_override]
        if refusing:
            raise PrivacyError(
                f"mbar = {mbar} is not below the {width} features of column block {j}: entities "
                f"{', '.join(refusing)} will refuse it (privacy rule 3). Use mbar <= {min(widths) - 1}."
            )
    if not private:
        logger.warning(NOT_PRIVATE_BANNER)
    return private


def plan(federation: Federation, options: TrainOptions) -> dict[str, Any]:
    """What a training with ``options`` would ask each column block for, and what it pins: from Metadata only.

    Nothing is released (Metadata holds shapes and the guards' states). Per column block: its width, basis epoch,
    the view its epoch pinned and the points per record its epochs used; the verdict (pins a new view, uses the
    pinned one, or is refused: another kernel or more points than the epoch's pin) and what changing it later costs.

    Returns
    -------
    dict
        kernel, mu (the width entities are asked for), mbar, and "column_blocks": one dict per column block.
    """
    with Session(federation, options.deadline) as session:
        metadata = session.load_metadata()
        widths = [session.n_features(j) for j in federation.column_blocks]
        n_train = sum(metadata[session.row_block(i)[0].id].n_train for i in federation.row_blocks)
        mbar = options.mbar if options.mbar is not None else default_mbar(widths, n_train)
        report: dict[str, Any] = {
            "kernel": options.kernel,
            "mu": session.fetch_width(options.kernel),
            "mbar": mbar,
            "column_blocks": [],
        }
        for j, width in zip(federation.column_blocks, widths, strict=True):
            members = session.column_block(j)
            meta = metadata[members[0].id]
            pinned_kernel = meta.pinned_basis.split(" ", 1)[0].rstrip(",") if meta.pinned_basis else ""
            if not meta.pinned_basis:
                verdict = f"pins {options.kernel} with mbar <= {mbar} for basis epoch {meta.epoch}"
                used = meta.points_used + mbar + (1 if meta.points_used and options.kernel != pinned_kernel else 0)
            elif pinned_kernel != options.kernel or mbar > meta.pinned_mbar:
                verdict = (
                    f"refused: epoch {meta.epoch} pinned {meta.pinned_basis} with mbar <= {meta.pinned_mbar}; another "
                    "kernel or more points needs the next epoch (`ppsvm entity epoch --next` at "
                    f"{', '.join(e.id for e in members)})"
                )
                used = meta.points_used
            else:
                verdict = f"uses the view epoch {meta.epoch} pinned ({meta.pinned_basis})"
                used = meta.points_used
            report["column_blocks"].append(
                {
                    "column_block": j,
                    "features": width,
                    "epoch": meta.epoch,
                    "pinned": meta.pinned_basis,
                    "pinned_mbar": meta.pinned_mbar,
                    "verdict": verdict,
                    "points_after": used,
                    "points_allowed": width - 1,
                    "entities": [e.id for e in members],
                }
            )
    return report


def plan_text(report: dict[str, Any]) -> str:
    """:func:`plan` for a person."""
    width = f" at the width entities are asked for, mu = {report['mu']:g}" if report["kernel"] == "gaussian" else ""
    lines = [f"plan (nothing is released): {report['kernel']} kernel{width}, mbar = {report['mbar']}"]
    for block in report["column_blocks"]:
        left = block["points_allowed"] - block["points_after"]
        lines.append(
            f"  column block {block['column_block']} ({block['features']} features, epoch {block['epoch']}): "
            f"{block['verdict']}. Afterwards its epochs have used {block['points_after']} of the "
            f"{block['points_allowed']} points per record privacy rule 3 allows over its life: "
            + (
                f"a later epoch (another kernel, bounds or more points) could use at most {left - 1 if left > 0 else 0}"
                f" with another kernel, {left} with the same"
                if left > 0
                else "no later epoch could be opened (train with fewer points to keep room to change)"
            )
        )
    return "\n".join(lines)


def train_and_save(federation: Federation, options: TrainOptions, model_out: Path) -> Model | MulticlassModel:
    """Train, write the model atomically, then send it to every entity."""
    model = train(federation, options)
    model.save(model_out)
    logger.info(
        "model written to %s (trained in %.2f s: survey %.2f s, kernel fetch %.2f s, LP %.2f s)",
        model_out,
        model.training["seconds"],
        model.training["survey_seconds"],
        model.training["fetch_seconds"],
        model.training["lp_seconds"],
        extra={"duration_ms": round(model.training["seconds"] * 1000, 3)},
    )
    if options.distribute:
        distribute(federation, model.to_json(), model_out, options.deadline)
    return model


def distribute(federation: Federation, model_json: str, model_out: Path, deadline: float) -> None:
    """Send a written model file to every entity."""
    with Session(federation, deadline) as session:
        try:
            session.each(lambda c: c.accept_model(model_json))
        except EntityError as error:
            raise EntityError(
                f"the model was written to {model_out} but not delivered to every entity: {error}"
            ) from None
    logger.info("model delivered to %d entities", len(federation.entities))
