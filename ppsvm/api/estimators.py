"""scikit-learn estimators for the random-kernel methods, fitted on a federation simulated in this process.

``fit(X, y)`` cuts X into a checkerboard of cells as ``ppsvm split`` does, serves every cell with the
entity's own gRPC server and release guard inside this process (:mod:`ppsvm.api.inprocess`), and
trains with the coordinator's own functions: the networked path's math and privacy checks, without
child processes. The fitted model (``model_``) is the model file a networked run writes.

scikit-learn is the ``api`` extra: entities and coordinators never import this module. The input checks
and seeding below (two_classes, simulation_seeds, ...) serve :mod:`ppsvm.api.dp_estimator` too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import numbers
import secrets
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, cast

import numpy as np

try:
    from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
    from sklearn.utils import Tags, check_random_state
    from sklearn.utils.multiclass import check_classification_targets, type_of_target
    from sklearn.utils.validation import _check_sample_weight, check_is_fitted
except ImportError as error:
    raise ImportError("ppsvm's estimators need scikit-learn: pip install 'ppsvm[api]'") from error

from ppsvm.api.columns import encoded_blocks, fit_input, later_input
from ppsvm.api.inprocess import new_record_kernel, simulate, simulation_secrets
from ppsvm.constants import DEFAULT_FOLDS
from ppsvm.coordinator.train import TrainOptions, train
from ppsvm.core.kernels import KernelName
from ppsvm.core.lp import DEFAULT_FORMULATION, Formulation, Task
from ppsvm.core.model_file import TwoClassOutputs
from ppsvm.core.multiclass import RandomKernelModel, class_probabilities
from ppsvm.core.randomness import record_pseudonyms
from ppsvm.core.tuning import Search
from ppsvm.data.dataset import Dataset
from ppsvm.data.partition import ID_KEY_FILE, feature_blocks
from ppsvm.errors import ConfigError, DataError, PpsvmWarning

__all__ = ["RandomKernelClassifier", "RandomKernelRegressor"]

AUTO = "auto"
RandomStateLike = int | np.random.RandomState | None


_SHARED_DOC = """
    Parameters
    ----------
    row_blocks : int, default=1
        Row blocks r: the records are dealt into r nearly equal blocks in shuffled order.
    column_blocks : int or sequence of sequences of int or str, default=1
        Column blocks s: a count (contiguous blocks of nearly equal width), or each block's features
        as column indices or, when X has column names, names. Each block needs at least 2 features
        (privacy rule 3 asks mbar < n_j random points).
    kernel : {"gaussian", "linear"}, default="gaussian"
    mbar : int or "auto", default="auto"
        Random points per column block, below every block's width; auto: min(n_j) - 1, at most 10%
        of the records.
    nu, mu : float or "auto", default="auto"
        The LP's weight and the Gaussian width; auto: k-fold cross-validation over the coordinator's grid.
    folds : int, default=5
        Cross-validation folds for "auto".
    basis : {"auto", "paper", "product"}, default="auto"
        "product" adds kernel columns pairing rows of different B_j's; "auto" cross-validates both on the same
        blocks and keeps the better (see ``ppsvm coordinator train --basis``).
    search : {"grid", "uniform-design"}, default="grid"
        How "auto" nu and mu are searched: the 7 x 8 grid, or the papers' nested uniform design
        (``ppsvm coordinator train --search``).
    lp_formulation : {"auto", "ipm", "highs-dual", "cvxpy-dual", "cvxpy-primal"}, default="auto"
    class_weight : {None, "balanced"} or dict, default=None
        Classifier: "balanced" weighs each record's error by m / (2 x its class's count) in each binary LP (each
        one-vs-rest LP), so a rare class counts as much as a common one; a dict gives each class's weight (> 0) by
        label. The probabilities stay calibrated to the classes' real frequencies. The regressor refuses it.
        ``fit(X, y, sample_weight=)`` multiplies in.
    random_state : int, RandomState or None, default=None
        An int is the seed of the shuffle and the folds, and fixes the column-block secrets, so B_j
        (:func:`ppsvm.api.inprocess.simulation_secrets`); None draws fresh secrets on every fit.

    Attributes
    ----------
    model_ : ppsvm.core.model.Model
        The model file of a networked run (u, gamma, kernel, widths, scaling; never B or data):
        ``model_.save(path)`` writes it.
    column_blocks_ : list of ndarray of int
        The feature indices of each column block.
    n_features_in_ : int
    feature_names_in_ : ndarray of str, shape (n_features_in_,)
        Only when X had column names (e.g. a pandas DataFrame).
    columns_ : ppsvm.api.columns.ColumnEncoding or None
        How each column of X is encoded: a pandas ``category``, object or string column becomes one 0/1 column per
        category the fit data holds (sorted), kept in its column's block; the others are numbers. None when X was
        not a DataFrame.

    Notes
    -----
    ``predict`` acts for the owners of a new record's features: each column block's part of the
    kernel row is computed from that block's secret, so a fitted estimator holds the secrets and
    must be kept like them. ``model_`` alone predicts only through the entities (by record id).
"""


class _RandomKernelEstimator(BaseEstimator):
    """Parameters, the simulated fit and the prediction shared by the random-kernel estimators."""

    _task: ClassVar[Task]

    def __init__(
        self,
        *,
        row_blocks: int = 1,
        column_blocks: int | Sequence[Sequence[int | str]] = 1,
        kernel: str = "gaussian",
        mbar: int | str = AUTO,
        nu: float | str = AUTO,
        mu: float | str = AUTO,
        folds: int = DEFAULT_FOLDS,
        basis: str = "auto",
        search: str = "grid",
        lp_formulation: str = DEFAULT_FORMULATION,
        class_weight: str | Mapping[Any, float] | None = None,
        random_state: RandomStateLike = None,
    ) -> None:
        self.row_blocks = row_blocks
        self.column_blocks = column_blocks
        self.kernel = kernel
        self.mbar = mbar
        self.nu = nu
        self.mu = mu
        self.folds = folds
        self.basis = basis
        self.search = search
        self.lp_formulation = lp_formulation
        self.class_weight = class_weight
        self.random_state = random_state

    def _fit(self, X: np.ndarray, target: np.ndarray, sample_weight: Any = None, cells: Task | None = None) -> None:
        """Train on the simulated federation; X (m, n) validated, target (m,) as the coordinator takes it,
        ``sample_weight`` None or array-like (m,) of finite weights > 0.

        ``cells``: the task the cells are written for, when not the estimator's (class numbers of a multiclass fit are
        written as a regression's values: ``ppsvm split`` writes classification labels as +-1)."""
        # Blocks of the columns given (names refer to them); an encoded category's columns stay in its column's.
        blocks = encoded_blocks(self.columns_, self._feature_blocks(self.n_features_in_))
        for j, block in enumerate(blocks):
            if len(block) < 2:
                raise ConfigError(
                    f"column block {j} has {len(block)} feature(s): the random kernel needs mbar < n_j "
                    "random points per block (privacy rule 3), so at least 2 features in each"
                )
        seed, run_seed = simulation_seeds(self.random_state)
        options = TrainOptions(
            task=self._task,
            # TrainOptions checks the names and numbers, with messages naming the setting.
            kernel=cast(KernelName, self.kernel),
            mbar=_setting(self.mbar),
            nu=_setting(self.nu),
            mu=_setting(self.mu),
            folds=whole_number(self.folds, "folds", 2),
            seed=run_seed,
            formulation=cast(Formulation, self.lp_formulation),
            distribute=False,
            basis=self.basis,
            search=cast(Search, self.search),  # TrainOptions refuses an unknown name
            advice="api",
            # A dict has become record weights in fit; TrainOptions refuses another value, and any for regression.
            class_weight=None if isinstance(self.class_weight, Mapping) else self.class_weight,
        )
        column_secrets = simulation_secrets(seed, len(blocks))
        with advice_as_warnings(2), tempfile.TemporaryDirectory(prefix="ppsvm-fit-") as work:
            with simulate(
                fit_records(X, target),
                Path(work),
                rows=whole_number(self.row_blocks, "row_blocks", 1),
                column_blocks=blocks,
                task=cells or self._task,
                seed=run_seed,
                secrets=column_secrets,
            ) as federation:
                if sample_weight is not None:
                    # The coordinator knows the records by their pseudonyms under the simulation's record-id key.
                    key = bytes.fromhex((Path(work) / "cells" / ID_KEY_FILE).read_text().strip())
                    names = record_pseudonyms(key, fit_ids(len(target)))
                    weights = dict(zip(names, sample_weight.tolist(), strict=True))
                    options = dataclasses.replace(options, sample_weight=weights)
                self.model_ = train(federation, options)
        self.column_blocks_ = blocks
        self._secrets = column_secrets

    def _feature_blocks(self, n: int) -> list[np.ndarray]:
        spec = self.column_blocks
        if isinstance(spec, numbers.Integral) and not isinstance(spec, bool):
            count = whole_number(spec, "column_blocks", 1)
            if count > n:
                raise ConfigError(f"column_blocks = {count} but X has {n} features")
            return feature_blocks(n, count)
        if isinstance(spec, (str, bytes)) or not isinstance(spec, Sequence):
            raise ConfigError(f"column_blocks must be a count or a list of each block's features, got {spec!r}")
        names = list(getattr(self, "feature_names_in_", ()))
        given = [[self._column(feature, names) for feature in block] for block in spec]
        return feature_blocks(n, len(given), given)

    @staticmethod
    def _column(feature: Any, names: list[str]) -> int:
        if isinstance(feature, str):
            if feature not in names:
                raise ConfigError(
                    f"column_blocks names feature {feature!r}, which X does not have "
                    + ("(X has no column names)" if not names else f"(its columns: {names[:8]}...)")
                )
            return names.index(feature)
        if isinstance(feature, numbers.Integral) and not isinstance(feature, bool):
            return int(feature)
        raise ConfigError(f"column_blocks lists {feature!r}: name features by column index or column name")

    def _decision(self, X: Any) -> np.ndarray:
        check_is_fitted(self)
        X = later_input(self, X)
        return self.model_.decision(new_record_kernel(self.model_, self._secrets, self.column_blocks_, X))


class TwoClassPredictions(ClassifierMixin):
    """``predict`` and the tags of a two-class estimator whose ``decision_function`` decides ``classes_[1]`` at >= 0."""

    classes_: np.ndarray
    model_: TwoClassOutputs
    decision_function: Callable[[Any], np.ndarray]

    def predict(self, X: Any) -> np.ndarray:
        """The class of each row: ``classes_[1]`` where the decision value is >= 0, as the model files decide.

        Parameters
        ----------
        X : array-like, shape (m, n_features_in_)

        Returns
        -------
        ndarray, shape (m,)
        """
        decision = self.decision_function(X)  # first: it says when the estimator is not fitted
        return self.classes_[(decision >= 0).astype(np.int64)]

    def predict_proba(self, X: Any) -> np.ndarray:
        """Calibrated probabilities of ``classes_[0]`` and ``classes_[1]`` for each row.

        Platt scaling of decision values the fit did not train on (:mod:`ppsvm.core.calibration`): out-of-fold
        values of the training records for the random-kernel classifier, the public records' values for the DP
        one. As with scikit-learn's SVC, a row's larger probability and ``predict`` can disagree for decision
        values near 0.

        Parameters
        ----------
        X : array-like, shape (m, n_features_in_)

        Returns
        -------
        ndarray, shape (m, 2)
        """
        decision = self.decision_function(X)  # first: it says when the estimator is not fitted
        return class_probabilities(self.model_, decision)

    def __sklearn_tags__(self) -> Tags:
        return two_class_tags(super().__sklearn_tags__())


class RandomKernelClassifier(ClassifierMixin, _RandomKernelEstimator):
    __doc__ = (
        """Random-kernel privacy-preserving SVM classifier (Mangasarian & Wild), fitted on a simulated federation.

    Two classes of any labels: ``classes_[0]`` is the LP's -1 and ``classes_[1]`` its +1. Three or more: one-vs-rest,
    every class's LP solved on the one kernel the entities release (``model_`` is a
    :class:`~ppsvm.core.multiclass.MulticlassModel`).
"""
        + _SHARED_DOC
    )

    _task = "classify"
    model_: RandomKernelModel

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> RandomKernelClassifier:
        """Split X into cells, serve them in this process and train over them.

        Parameters
        ----------
        X : array-like, shape (m, n)
            Finite feature values (a pandas DataFrame keeps its column names).
        y : array-like, shape (m,)
            Two or more distinct labels; with two, every row block needs both.
        sample_weight : array-like, shape (m,), optional
            Each record's weight on its error term, >= 0 (0 leaves the record out).

        Returns
        -------
        self
        """
        X, y = fit_input(self, X, y, ensure_min_samples=2)
        check_classification_targets(y)
        if isinstance(self.class_weight, Mapping):
            sample_weight = _class_weights(self.class_weight, y) * (1.0 if sample_weight is None else sample_weight)
        X, y, weights = weighted_rows(X, y, sample_weight)
        self.classes_, index = np.unique(y, return_inverse=True)
        if len(self.classes_) < 2:
            raise DataError(f"{type(self).__name__} needs two or more classes; y holds {self.classes_.tolist()} only")
        if len(self.classes_) == 2:
            self._fit(X, np.where(index == 1, 1.0, -1.0), weights)
        else:
            self._fit(X, index.astype(np.float64), weights, cells="regress")
        return self

    def predict(self, X: Any) -> np.ndarray:
        """The class of each row: with two classes ``classes_[1]`` where the decision value is >= 0, as the model
        files decide; with more, the class of the largest one-vs-rest decision value.

        Parameters
        ----------
        X : array-like, shape (m, n_features_in_)

        Returns
        -------
        ndarray, shape (m,)
        """
        decision = self.decision_function(X)  # first: it says when the estimator is not fitted
        if decision.ndim == 2:
            return self.classes_[np.argmax(decision, axis=1)]
        return self.classes_[(decision >= 0).astype(np.int64)]

    def predict_proba(self, X: Any) -> np.ndarray:
        """Calibrated probabilities of each class in ``classes_`` for each row.

        Platt scaling of out-of-fold decision values of the training records (:mod:`ppsvm.core.calibration`); with
        three or more classes each one-vs-rest member's, normalised to sum 1. A row's largest probability and
        ``predict`` can disagree for decision values near the boundary, as with scikit-learn's SVC.

        Parameters
        ----------
        X : array-like, shape (m, n_features_in_)

        Returns
        -------
        ndarray, shape (m, len(classes_))
        """
        decision = self.decision_function(X)  # first: it says when the estimator is not fitted
        return class_probabilities(self.model_, decision)

    def decision_function(self, X: Any) -> np.ndarray:
        """K(x', B') u - gamma for each row; positive values predict ``classes_[1]``. With three or more classes,
        each one-vs-rest member's value (the largest predicts).

        Parameters
        ----------
        X : array-like, shape (m, n_features_in_)

        Returns
        -------
        ndarray, shape (m,), or (m, len(classes_))
        """
        return self._decision(X)


class RandomKernelRegressor(RegressorMixin, _RandomKernelEstimator):
    __doc__ = (
        """Random-kernel privacy-preserving approximation (Fung & Mangasarian), fitted on a simulated federation.
"""
        + _SHARED_DOC
    )

    _task = "regress"

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> RandomKernelRegressor:
        """Split X into cells, serve them in this process and solve the 1-norm regression LP over them.

        Parameters
        ----------
        X : array-like, shape (m, n)
        y : array-like, shape (m,)
            Finite real targets.
        sample_weight : array-like, shape (m,), optional
            Each record's weight on its error term, >= 0 (0 leaves the record out).

        Returns
        -------
        self
        """
        X, y = fit_input(self, X, y, y_numeric=True, ensure_min_samples=2)
        X, y, weights = weighted_rows(X, y, sample_weight)
        self._fit(X, np.asarray(y, dtype=np.float64), weights)
        return self

    def predict(self, X: Any) -> np.ndarray:
        """K(x', B') u - gamma for each row.

        Parameters
        ----------
        X : array-like, shape (m, n_features_in_)

        Returns
        -------
        ndarray, shape (m,)
        """
        return self._decision(X)


@contextlib.contextmanager
def advice_as_warnings(frames_to_user: int) -> Iterator[None]:
    """Inside, what ppsvm logs at WARNING or above is collected instead of reaching the user's logging; on leaving,
    each distinct message is issued once as a :class:`~ppsvm.errors.PpsvmWarning`, which ``warnings`` filters can
    silence (repeated fits, as in a grid search, show it once: the default filter's once per place and text).

    ``frames_to_user``: the calls from the ``with`` statement's function up to the user's code (1 in ``fit``
    itself), so that the warning names the user's line."""
    collected: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            collected.append(record.getMessage())

    handler, package = Collect(logging.WARNING), logging.getLogger("ppsvm")
    propagate = package.propagate
    package.addHandler(handler)
    package.propagate = False
    try:
        yield
    finally:
        package.removeHandler(handler)
        package.propagate = propagate
    for message in dict.fromkeys(collected):
        # This generator, contextlib's __exit__, then the with statement's function.
        warnings.warn(message, PpsvmWarning, stacklevel=3 + frames_to_user)


def _class_weights(class_weight: Mapping[Any, float], y: np.ndarray) -> np.ndarray:
    """Each record's weight, shape (m,), from a weight per label (labels not named weigh 1)."""
    weights = np.array([float(class_weight.get(label, 1.0)) for label in y.tolist()])
    if not (np.isfinite(weights).all() and (weights >= 0).all()):
        raise ConfigError(f"class_weight must give finite weights >= 0, got {dict(class_weight)!r}")
    return weights


def weighted_rows(X: np.ndarray, y: np.ndarray, sample_weight: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """X (m, n) and y (m,) without the records of weight 0, and the others' weights (None without sample_weight).

    A weight of 0 removes the record's error term, which is the LP without the record: left out here, since the LP
    takes weights > 0 only.
    """
    if sample_weight is None:
        return X, y, None
    weights = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
    keep = weights > 0
    if np.count_nonzero(keep) < 2:
        raise DataError(f"sample_weight leaves {np.count_nonzero(keep)} record(s) of weight > 0; fit needs 2 or more")
    return X[keep], y[keep], weights[keep]


def fit_ids(m: int) -> list[str]:
    """The record ids of the rows given to fit: their row numbers as text."""
    return [str(k) for k in range(m)]


def fit_records(X: np.ndarray, y: np.ndarray) -> Dataset:
    """Records as ``ppsvm split`` reads them: ids are row numbers (:func:`fit_ids`), features x0, x1, ... (names stay
    out of the cells, where ``id``, ``label`` or ``split`` would clash with the cell's own columns)."""
    return Dataset(
        ids=np.array(fit_ids(len(y))),
        X=X,
        y=y,
        feature_names=tuple(f"x{k}" for k in range(X.shape[1])),
        source="the records given to fit",
    )


def two_classes(y: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    """y's two classes, sorted, shape (2,), and y as the LP's labels, shape (m,): -1 for ``classes[0]``, else +1."""
    check_classification_targets(y)
    kind = type_of_target(y, input_name="y")
    if kind == "multiclass":
        raise DataError(
            f"Only binary classification is supported: {name} releases DP weights for two classes. One release per "
            "class would split each entity's epsilon among the classes: use RandomKernelClassifier (one-vs-rest on "
            f"one kernel, no epsilon), or OneVsRestClassifier({name}(epsilon=epsilon / k)) for k classes"
        )
    if kind != "binary":
        raise DataError(f"Only binary classification is supported: {name} takes two classes, y is {kind}")
    classes, index = np.unique(y, return_inverse=True)
    if len(classes) != 2:
        raise DataError(
            f"{name} is a binary classifier: y holds {len(classes)} class(es) {classes[:5].tolist()}, "
            "it needs exactly 2"
        )
    return classes, np.where(index == 1, 1.0, -1.0)


def two_class_tags(tags: Tags) -> Tags:
    """A two-class classifier's tags: scikit-learn's checks then leave out the multi-class cases."""
    assert tags.classifier_tags is not None  # ClassifierMixin sets them
    tags.classifier_tags.multi_class = False
    return tags


def simulation_seeds(random_state: RandomStateLike) -> tuple[int | None, int]:
    """The simulation's seed (an int as given, a draw from a RandomState, None for None: fresh secrets), and the
    seed of its shuffle and folds (the same, or a fresh one for None)."""
    generator = check_random_state(random_state)  # refuses what scikit-learn refuses
    if random_state is None:
        return None, secrets.randbelow(2**31)
    seed = int(random_state) if isinstance(random_state, numbers.Integral) else int(generator.randint(2**31 - 1))
    return seed, seed


def _setting(value: Any) -> Any:
    """'auto' as None (the coordinator chooses or tunes); numpy scalars as Python numbers; the rest as given,
    for the coordinator's options to check."""
    if isinstance(value, str) and value == AUTO:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return value


def positive_number(value: Any, name: str) -> float:
    number = float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else math.nan
    if not (math.isfinite(number) and number > 0):
        raise ConfigError(f"{name} must be a finite number > 0, got {value!r}")
    return number


def whole_number(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ConfigError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)
