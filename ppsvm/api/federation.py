"""A client for a running, networked federation: the coordinator's functions behind one object.

``Federation.from_toml(path)`` reads the federation file the coordinator uses (entity ids,
addresses, grid positions, the coordinator's TLS material); every method opens mutual-TLS
channels to the entities and calls the same coordinator function as the ``ppsvm coordinator``
command of the same name, which goes through this class.

Task settings follow the command line's rule: an argument left as None takes the federation
file's ``[task]`` value, else the default; "auto" (or no value anywhere) lets the coordinator
choose or tune it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from ppsvm.config import EntityConfig, load_entity_config, load_federation
from ppsvm.config import Federation as FederationConfig
from ppsvm.constants import DEFAULT_DASK_WORKERS, DEFAULT_DEADLINE_S, DEFAULT_FOLDS, HEALTH_DEADLINE_S
from ppsvm.coordinator.audit import audit
from ppsvm.coordinator.dp_train import DpOptions, in_api_words, train_dp, train_dp_and_save
from ppsvm.coordinator.evaluate import (
    BaselineFigures,
    entity_alone,
    evaluate_model,
    score_records,
)
from ppsvm.coordinator.serve import serve_coordinator
from ppsvm.coordinator.status import ServerStatus, federation_status
from ppsvm.coordinator.train import TrainOptions, plan, train, train_and_save
from ppsvm.coordinator.view import write_view
from ppsvm.core.dp import DEFAULT_N_FREQUENCIES
from ppsvm.core.dp_model import DpModel, load_any_model
from ppsvm.core.lp import DEFAULT_FORMULATION, Formulation
from ppsvm.core.model import Model
from ppsvm.core.multiclass import MulticlassModel, RandomKernelModel, class_probabilities
from ppsvm.core.randomness import record_pseudonyms
from ppsvm.core.threshold import DEFAULT_THRESHOLD_EPSILON
from ppsvm.core.tuning import Search
from ppsvm.errors import ConfigError, DataError

__all__ = ["AUTO", "Federation", "task_setting", "train_options"]

AUTO = "auto"
# A model object, or the path of a model file.
ModelLike = Model | MulticlassModel | DpModel | str | Path


def task_setting(table: Mapping[str, Any], name: str, value: Any, default: Any = AUTO) -> Any:
    """``value``, else the federation file's ``[task]`` value ``table[name]``, else ``default``; "auto" becomes None."""
    value = table.get(name, default) if value is None else value
    return None if value == AUTO else value


def train_options(
    table: Mapping[str, Any],
    *,
    task: str | None = None,
    kernel: str | None = None,
    mbar: int | str | None = None,
    nu: float | str | None = None,
    mu: float | str | None = None,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
    formulation: str = DEFAULT_FORMULATION,
    basis: str = "auto",
    search: str = "grid",
    deadline: float = DEFAULT_DEADLINE_S,
    distribute: bool = True,
    class_weight: str | None = None,
    engine: str | None = None,
    dask_scheduler: str | None = None,
    dask_workers: int | None = None,
    dask_tls: str | Path | None = None,
) -> TrainOptions:
    """Random-kernel training settings: the arguments, then the ``[task]`` table, then the defaults (see module).

    Raises
    ------
    ConfigError
        A setting out of range, naming it.
    """
    return TrainOptions(
        # TrainOptions checks every name and number, with messages naming the setting.
        task=task_setting(table, "task", task, "classify"),
        kernel=task_setting(table, "kernel", kernel, "gaussian"),
        mbar=task_setting(table, "mbar", mbar),
        nu=task_setting(table, "nu", nu),
        mu=task_setting(table, "mu", mu),
        folds=folds,
        seed=seed,
        formulation=cast(Formulation, formulation),
        deadline=deadline,
        distribute=distribute,
        basis=basis,
        search=cast(Search, search),
        class_weight=task_setting(table, "class_weight", class_weight, None),
        engine=task_setting(table, "engine", engine, "numpy"),
        dask_scheduler=task_setting(table, "dask_scheduler", dask_scheduler, None),
        dask_workers=task_setting(table, "dask_workers", dask_workers, DEFAULT_DASK_WORKERS),
        dask_tls=None if (tls := task_setting(table, "dask_tls", dask_tls, None)) is None else Path(tls),
    )


class Federation:
    """A running federation of entities, seen from the coordinator.

    Parameters
    ----------
    config : ppsvm.config.Federation
        The parsed federation file (see :meth:`from_toml`).
    deadline : float, default=120
        Seconds allowed per entity call.

    Examples
    --------
    >>> federation = Federation.from_toml("split/federation.toml")  # doctest: +SKIP
    >>> model = federation.train("model.json", kernel="gaussian")  # doctest: +SKIP
    >>> federation.evaluate(model)["error_rate"]  # doctest: +SKIP
    """

    def __init__(self, config: FederationConfig, *, deadline: float = DEFAULT_DEADLINE_S) -> None:
        self.config = config
        self.deadline = deadline

    @classmethod
    def from_toml(cls, path: str | Path, *, insecure: bool = False, deadline: float = DEFAULT_DEADLINE_S) -> Federation:
        """Read a federation file.

        Parameters
        ----------
        path : str or Path
        insecure : bool, default=False
            Plaintext instead of mutual TLS (trusted networks only; logged as a warning).
        deadline : float, default=120
            Seconds allowed per entity call.

        Raises
        ------
        ConfigError
            The file is missing or invalid (names the file and key).
        """
        return cls(dataclasses.replace(load_federation(path), insecure=insecure), deadline=deadline)

    def train(
        self,
        model_out: str | Path | None = None,
        *,
        task: str | None = None,
        kernel: str | None = None,
        mbar: int | str | None = None,
        nu: float | str | None = None,
        mu: float | str | None = None,
        folds: int = DEFAULT_FOLDS,
        seed: int = 0,
        formulation: str = DEFAULT_FORMULATION,
        basis: str = "auto",
        search: str = "grid",
        distribute: bool = True,
        class_weight: str | None = None,
        engine: str | None = None,
        dask_scheduler: str | None = None,
        dask_workers: int | None = None,
        dask_tls: str | Path | None = None,
    ) -> RandomKernelModel:
        """Train a random-kernel model over the entities (``ppsvm coordinator train``): a
        :class:`~ppsvm.core.multiclass.MulticlassModel` (one-vs-rest on one fetched kernel) when the labels are
        whole numbers of three or more classes.

        Parameters
        ----------
        model_out : str or Path, optional
            Write the model there (atomically) and, with ``distribute``, send it to every entity;
            None returns it only.
        task, kernel, mbar, nu, mu, folds, seed, formulation, basis, search
            As the command's flags; None takes the ``[task]`` table's value, "auto" tunes.
        distribute : bool, default=True
        class_weight : {None, "balanced"}
            "balanced": each class weighs the same in the LP, whatever its count (``--class-weight balanced``).
        engine : {None, "numpy", "dask"}
            "dask": K's rows streamed into chunks on Dask workers and the LP solved there (``--engine dask``);
            None takes the ``[task]`` table's value, else numpy.
        dask_scheduler : str, optional
            A running scheduler's address (tls://host:port); None starts ``dask_workers`` local worker processes.
        dask_workers : int, optional
            The local cluster's worker processes (default 2).
        dask_tls : str or Path, optional
            The named scheduler's cluster certificates, a directory ``ppsvm coordinator dask-certs`` wrote: a CA of
            the cluster's own (one from the federation's CA is refused). Required with ``dask_scheduler``.

        Returns
        -------
        Model or MulticlassModel
        """
        options = train_options(
            self.config.task,
            task=task,
            kernel=kernel,
            mbar=mbar,
            nu=nu,
            mu=mu,
            folds=folds,
            seed=seed,
            formulation=formulation,
            basis=basis,
            search=search,
            deadline=self.deadline,
            distribute=distribute,
            class_weight=class_weight,
            engine=engine,
            dask_scheduler=dask_scheduler,
            dask_workers=dask_workers,
            dask_tls=dask_tls,
        )
        if model_out is None:
            return train(self.config, options)
        return train_and_save(self.config, options, Path(model_out))

    def plan(self, **flags: Any) -> dict[str, Any]:
        """What :meth:`train` with the same arguments would ask and pin, from Metadata only (``train --dry-run``).

        Returns
        -------
        dict
            kernel, mu, mbar and, per column block, its epoch, pinned view, verdict and points per record used.
        """
        return plan(self.config, train_options(self.config.task, deadline=self.deadline, distribute=False, **flags))

    def view(self, out_dir: str | Path, *, kernel: str | None = None, mbar: int | str | None = None) -> dict[str, Any]:
        """Write what the coordinator receives for the training records (``ppsvm coordinator view``).

        Every entity's reply as received (``replies/<entity>-train.npy``, masked where its row block
        combines its blocks), the assembled kernel (``kernel-train.npy``), the record order
        (``ids-train.txt``) and ``view.json`` (kernel, mbar, mu, scaling): what an audit or an attack
        test works on. The fetch is a release, recorded by every entity like a training's.

        Parameters
        ----------
        out_dir : str or Path
        kernel, mbar
            As :meth:`train`'s; None takes the ``[task]`` table's value.

        Returns
        -------
        dict
            The contents of ``view.json``.
        """
        options = train_options(self.config.task, kernel=kernel, mbar=mbar, deadline=self.deadline)
        return write_view(self.config, options, Path(out_dir))

    def train_dp(
        self,
        public: str | Path,
        model_out: str | Path | None = None,
        *,
        method: str = "dp-hybrid",
        mechanism: str = "laplace",
        epsilon: float | None = None,
        n_frequencies: int = DEFAULT_N_FREQUENCIES,
        C: float | str = "auto",
        width_factor: float | str = "auto",
        threshold_epsilon: float | None = DEFAULT_THRESHOLD_EPSILON,
        seed: int = 0,
        distribute: bool = True,
        allow_noisy: bool = False,
    ) -> DpModel:
        """Train a DP model (``ppsvm coordinator train --method dp-hybrid | private-svm | public-only``).

        Parameters
        ----------
        public : str or Path
            Public records (cell format: ``id,label,features...``), all used.
        model_out : str or Path, optional
            As for :meth:`train`.
        method, mechanism, epsilon, n_frequencies, C, seed
            As the command's ``--method``, ``--mechanism``, ``--epsilon``, ``--frequencies``, ``--C``, ``--seed``.
        C, width_factor : float or "auto", default="auto"
            As ``--C`` and ``--width-factor``: "auto" chooses on the public records.
        threshold_epsilon : float or None, default=0.1
            As ``--threshold-epsilon``; None keeps the threshold at 0.
        distribute : bool, default=True
        allow_noisy : bool, default=False
            As ``--allow-noisy``: release even where the expected noise exceeds the bound on the weights.

        Returns
        -------
        DpModel
        """
        options = DpOptions(
            method=method,
            public=Path(public),
            mechanism=mechanism,
            epsilon=epsilon,
            n_frequencies=n_frequencies,
            C=None if C == "auto" else float(C),
            width_factor=None if width_factor == "auto" else float(width_factor),
            threshold_epsilon=threshold_epsilon,
            seed=seed,
            deadline=self.deadline,
            distribute=distribute,
            allow_noisy=allow_noisy,
        )
        # public-only trains on the public records alone: no entity is asked.
        federation = self.config if method != "public-only" else None
        try:
            if model_out is None:
                return train_dp(federation, options)
            return train_dp_and_save(federation, options, Path(model_out))
        except (ConfigError, DataError) as refused:
            raise type(refused)(in_api_words(str(refused))) from None

    def evaluate(self, model: ModelLike, *, epsilon: float | None = None) -> dict[str, Any]:
        """Score a model on the entities' held-out records (``ppsvm coordinator evaluate``).

        Parameters
        ----------
        model : Model, DpModel, str or Path
            A model, or its file.
        epsilon : float, optional
            DP models only, and required for them: what each entity spends on its noised error count.

        Returns
        -------
        dict
            error_rate and auc (classify) or relative_error and rmse (regress), n_test, private.
        """
        return evaluate_model(self.config, _model(model), self.deadline, epsilon=epsilon)

    def decision_function(
        self, model: ModelLike, ids: Sequence[str], id_key: str | Path | bytes | None = None
    ) -> np.ndarray:
        """Decision values of records the entities hold, named by id (what ``coordinator serve`` answers).

        Parameters
        ----------
        model : Model, str or Path
            A random-kernel model trained on this federation, or its file.
        ids : sequence of str, length k
            The records' pseudonyms (what the entities publish when they hold a record-id key), or,
            with ``id_key``, their real ids.
        id_key : str, Path or bytes, optional
            The federation's record-id key (its hex file, or the key itself), held by the entities and by
            whoever asks on their behalf, never by the coordinator: ``ids`` are then mapped to pseudonyms here.

        Returns
        -------
        ndarray, shape (k,), or (k, classes) for a multiclass model
        """
        decisions, missing = self._score(_random_kernel(model, "Federation.predict"), ids, id_key)
        if missing:
            raise DataError(f"no entity holds record id(s) {missing[:5]}")
        return decisions

    def predict(self, model: ModelLike, ids: Sequence[str], id_key: str | Path | bytes | None = None) -> np.ndarray:
        """Predictions for records named by id: for classification the label the entities declare
        (``[data] labels``; +1 or -1 when the labels are those numbers), for regression the value.

        Parameters
        ----------
        model : Model, str or Path
        ids : sequence of str, length k
        id_key : str, Path or bytes, optional
            As in :meth:`decision_function`.

        Returns
        -------
        ndarray, shape (k,)
            Text labels, or float.
        """
        chosen = _random_kernel(model, "Federation.predict")
        prediction = chosen.prediction(self.decision_function(chosen, ids, id_key))
        named = isinstance(chosen, MulticlassModel) or chosen.labels
        return np.array(chosen.label_names(prediction)) if chosen.task == "classify" and named else prediction

    def predict_proba(
        self, model: ModelLike, ids: Sequence[str], id_key: str | Path | bytes | None = None
    ) -> np.ndarray:
        """Calibrated probabilities of the negative and the positive label for records named by id.

        Platt scaling fitted during training on out-of-fold decision values (:mod:`ppsvm.core.calibration`).

        Parameters
        ----------
        model : Model, str or Path
            A classification model.
        ids : sequence of str, length k
        id_key : str, Path or bytes, optional
            As in :meth:`decision_function`.

        Returns
        -------
        ndarray, shape (k, 2), or (k, classes) for a multiclass model
            Columns in the order of ``model.labels`` (negative, positive), or of ``model.classes``.
        """
        chosen = _random_kernel(model, "Federation.predict_proba")
        if chosen.task != "classify":
            raise ConfigError("predict_proba needs a classification model; this one is a regression model")
        return class_probabilities(chosen, self.decision_function(chosen, ids, id_key))

    def baselines(
        self,
        *,
        task: str | None = None,
        kernel: str | None = None,
        nu: float | str | None = None,
        mu: float | str | None = None,
        seed: int = 0,
        search: str = "grid",
        leave_one_out: bool = False,
        entities: Sequence[str] | None = None,
    ) -> list[BaselineFigures]:
        """Each entity trains on its own cell and reports only its held-out figures (``ppsvm coordinator baselines``).

        Parameters
        ----------
        task, kernel, nu, mu, seed, search
            As for :meth:`train`; "auto" widths and weights are tuned by each entity on its own cell.
        leave_one_out : bool, default=False
            Tune by leave-one-out (the papers' choice for cells of about 25 records) instead of 5-fold
            cross-validation; entities refuse it above 200 training records.
        entities : sequence of str, optional
            Ask only these entities (default all).

        Returns
        -------
        list of BaselineFigures
            One per entity, in federation order (``ppsvm.coordinator.evaluate.mean_figures`` averages them).
        """
        table = self.config.task
        return entity_alone(
            self.config,
            task_setting(table, "task", task, "classify"),
            task_setting(table, "kernel", kernel, "gaussian"),
            nu=task_setting(table, "nu", nu),
            mu=task_setting(table, "mu", mu),
            seed=seed,
            deadline=self.deadline,
            search=cast(Search, search),
            leave_one_out=leave_one_out,
            entities=entities,
        )

    def audit(self, entity_configs: Sequence[EntityConfig | str | Path] = ()) -> dict[str, Any]:
        """Which privacy conditions hold and what each party can learn (``ppsvm audit``); changes nothing.

        Parameters
        ----------
        entity_configs : sequence of EntityConfig, str or Path
            Entity configs available here, checked as well.

        Returns
        -------
        dict
            ``findings``, ``learns`` and ``ok`` (see ``ppsvm.coordinator.audit.audit``).
        """
        configs = [c if isinstance(c, EntityConfig) else load_entity_config(c) for c in entity_configs]
        return audit(self.config, configs, self.deadline)

    def score(
        self,
        model: ModelLike,
        ids: Sequence[str],
        id_key: str | Path | bytes | None = None,
        batch: int = 1000,
    ) -> tuple[np.ndarray, list[str]]:
        """Decision values of many records by id, in batches (``ppsvm coordinator predict``); unknown ids listed.

        Parameters
        ----------
        model : Model, str or Path
        ids : sequence of str, length k
            Pseudonyms, or with ``id_key`` real ids (as in :meth:`decision_function`): training, held-out
            or new records in the entities' scoring sources.
        id_key : str, Path or bytes, optional
        batch : int
            Records per round of kernel requests.

        Returns
        -------
        decisions : ndarray, shape (k,)
            NaN for the ids no row block holds.
        not_found : list of str
            Those ids, as given.
        """
        return self._score(_random_kernel(model, "Federation.score"), ids, id_key, batch)

    def _score(
        self, model: RandomKernelModel, ids: Sequence[str], id_key: str | Path | bytes | None, batch: int = 1000
    ) -> tuple[np.ndarray, list[str]]:
        asked = list(ids) if id_key is None else record_pseudonyms(read_id_key(id_key), list(ids))
        decisions, missing = score_records(self.config, model, asked, batch=batch, deadline=self.deadline)
        given = dict(zip(asked, ids, strict=True))
        absent = [np.nan] * len(model.classes) if isinstance(model, MulticlassModel) else np.nan
        return np.array([decisions.get(record, absent) for record in asked]), [given[record] for record in missing]

    def status(self, *, serve: str | None = None, deadline: float = HEALTH_DEADLINE_S) -> list[ServerStatus]:
        """Ask every entity's health check (and the prediction service's at ``serve``) at once
        (``ppsvm coordinator status``).

        Parameters
        ----------
        serve : str, optional
            HOST:PORT of a ``coordinator serve`` of this federation, listening with the coordinator's certificate.
        deadline : float, default=5
            Seconds each check may take; no retries (a snapshot, not a wait for the federation to come up).

        Returns
        -------
        list of ServerStatus
            One per entity in federation order, then the prediction service; ``answer.serving`` says whether
            it is SERVING, ``answer.reason`` why not.
        """
        return federation_status(self.config, deadline=deadline, serve=serve)

    def serve(self, model: ModelLike, listen: str = "127.0.0.1:0", *, metrics_at: tuple[str, int] | None = None) -> int:
        """Serve predictions by record id until SIGINT or SIGTERM (``ppsvm coordinator serve``); returns 0.

        Parameters
        ----------
        model : Model, str or Path
        listen : str, default="127.0.0.1:0"
            HOST:PORT; port 0 picks a free one (printed as ``listening on HOST:PORT``).
        metrics_at : (str, int), optional
            Host and port of a Prometheus metrics endpoint to serve as well (``--metrics-port``).
        """
        return serve_coordinator(
            self.config, _random_kernel(model, "`coordinator serve`"), listen, self.deadline, metrics_at
        )


def _model(model: ModelLike) -> RandomKernelModel | DpModel:
    return model if isinstance(model, (Model, MulticlassModel, DpModel)) else load_any_model(model)


def read_id_key(id_key: str | Path | bytes) -> bytes:
    """The federation's record-id key: itself, or read from its hex file (ConfigError naming the file)."""
    if isinstance(id_key, bytes):
        return id_key
    path = Path(id_key)
    try:
        return bytes.fromhex(path.read_text(encoding="utf-8").strip())
    except OSError as exc:
        raise ConfigError(f"cannot read the record-id key {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise ConfigError(f"the record-id key in {path} is not hex text") from exc


def _random_kernel(model: ModelLike, use: str) -> RandomKernelModel:
    """``model`` (or the model in its file), refused unless it is a random-kernel model."""
    loaded = _model(model)
    if not isinstance(loaded, (Model, MulticlassModel)):
        source = "the model" if isinstance(model, DpModel) else str(model)
        raise ConfigError(f"{source} is a DP model: {use} answers random-kernel models only")
    return loaded
