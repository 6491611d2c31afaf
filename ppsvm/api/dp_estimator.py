"""The hybrid differentially private RBF SVM (Li et al. 2014) as a scikit-learn estimator, fitted on a simulated
federation of row-block entities (see :mod:`ppsvm.api.estimators` for the simulation and the shared checks)."""

from __future__ import annotations

import dataclasses
import math
import numbers
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

try:
    from sklearn.base import BaseEstimator
    from sklearn.model_selection import train_test_split
    from sklearn.utils import Tags
    from sklearn.utils.validation import check_consistent_length, check_is_fitted, column_or_1d
except ImportError as error:
    raise ImportError("ppsvm's estimators need scikit-learn: pip install 'ppsvm[api]'") from error

from ppsvm.api.columns import fit_input, later_input
from ppsvm.api.estimators import (
    RandomStateLike,
    TwoClassPredictions,
    advice_as_warnings,
    fit_records,
    positive_number,
    simulation_seeds,
    two_classes,
    whole_number,
)
from ppsvm.api.inprocess import simulate
from ppsvm.config import CONTINUOUS_NOISE_KEY, NON_PRIVATE_WEIGHTS_KEY
from ppsvm.coordinator.dp_train import DpOptions, in_api_words, train_dp, write_public_source
from ppsvm.core.dp import DEFAULT_N_FREQUENCIES, NON_PRIVATE
from ppsvm.core.dp_model import DpModel
from ppsvm.core.threshold import DEFAULT_THRESHOLD_EPSILON
from ppsvm.data.dataset import Dataset
from ppsvm.data.partition import cell_csv
from ppsvm.entity.cell import CONTINUOUS_NOISE_MECHANISMS
from ppsvm.entity.guard import epsilon_micro, epsilon_of
from ppsvm.errors import ConfigError, DataError

__all__ = ["DpHybridClassifier"]


class DpHybridClassifier(TwoClassPredictions, BaseEstimator):
    """Hybrid differentially private RBF SVM (Li, Xiong, Ohno-Machado & Jiang 2014) and its baselines.

    From public records only: the [0, 1] scaling, the kernel width and the Fourier frequencies rho.
    Each simulated entity (a row block holding every feature) maps its records with zhat, trains
    the hinge-loss linear SVM and releases its weights through ``mechanism``, charged to its
    release log; the model averages the releases weighted by record counts.

    Parameters
    ----------
    method : {"dp-hybrid", "private-svm", "public-only"}, default="dp-hybrid"
        dp-hybrid learns rho from the public records; private-svm (Rubinstein et al.) draws it at
        random; public-only trains an RBF SVM on the public records alone.
    epsilon : float, default=1.0
        Each entity's weights release is epsilon-DP for its records. Not used by public-only or mechanism "none".
    mechanism : {"laplace", "output-gamma", "objective", "none"}, default="laplace"
        laplace: the paper's, drawn exactly on a power-of-two grid. output-gamma and objective
        (Chaudhuri, Monteleoni & Sarwate 2011): less noise, drawn in floating point. none: the
        non-private SVM (NOT PRIVATE). The simulated entities are given the consent the latter three need.
    n_frequencies : int, default=100
        D, Fourier frequencies (2D features).
    C : float or "auto", default="auto"
        SVM cost in (1/2)||w||^2 + (C/n) sum hinge; "auto": the largest of 0.1, 1, 10, 100 whose expected noise
        norm stays below half the bound sqrt(2C) on ||w|| (:mod:`ppsvm.core.dp_selection`, public facts only).
        The paper: 1.
    width_factor : float or "auto", default="auto"
        The kernel width as a multiple of the public records' median heuristic, or "auto": chosen among 0.25, 1
        and 4 by cross-validation on the public records with the release's noise simulated. The paper: 1.
    threshold_epsilon : float or None, default=0.1
        dp-hybrid and private-svm: what each entity spends on a noised histogram of the model's scores on its
        training records, from which the decision threshold is chosen (:mod:`ppsvm.core.threshold`); None keeps
        the threshold at 0 as the paper does, which on imbalanced labels predicts the majority class. Each
        simulated entity's budget is exactly epsilon + threshold_epsilon.
    row_blocks : int, default=1
        Entities, each holding a row block of the private records.
    public_size : float or int, default=0.1
        When ``fit`` gets no public records: the share (float, rounded up, at least 2) or number
        (int) of X's records, drawn at random in both classes, that are public; the rest are private.
    allow_noisy : bool, default=False
        Release even where the expected noise exceeds the bound sqrt(2C) on the weights, or where the released model
        is not expected to beat public-only or the majority class (estimated on the public records with the release
        simulated, :func:`ppsvm.core.dp_selection.estimate_worth`); by default such a fit raises ConfigError, with
        the figures, before anything is spent (``ppsvm coordinator train --dry-run`` shows them too).
    random_state : int, RandomState or None, default=None
        Seeds the public draw, the shuffle into row blocks and rho. The noise is never seeded: it
        comes from the operating system's generator, as in production.

    Attributes
    ----------
    model_ : ppsvm.core.dp_model.DpModel
        The DP model file (rho, public scaling and width, averaged weights, mechanism, epsilon).
    classes_ : ndarray, shape (2,)
    n_features_in_ : int
    feature_names_in_ : ndarray of str, shape (n_features_in_,)
        Only when X had column names.
    """

    model_: DpModel

    def __init__(
        self,
        *,
        method: str = "dp-hybrid",
        epsilon: float = 1.0,
        mechanism: str = "laplace",
        n_frequencies: int = DEFAULT_N_FREQUENCIES,
        C: float | str = "auto",
        width_factor: float | str = "auto",
        threshold_epsilon: float | None = DEFAULT_THRESHOLD_EPSILON,
        row_blocks: int = 1,
        public_size: float | int = 0.1,
        allow_noisy: bool = False,
        random_state: RandomStateLike = None,
    ) -> None:
        self.method = method
        self.epsilon = epsilon
        self.mechanism = mechanism
        self.n_frequencies = n_frequencies
        self.C = C
        self.width_factor = width_factor
        self.threshold_epsilon = threshold_epsilon
        self.row_blocks = row_blocks
        self.public_size = public_size
        self.allow_noisy = allow_noisy
        self.random_state = random_state

    def fit(self, X: Any, y: Any, X_public: Any = None, y_public: Any = None) -> DpHybridClassifier:
        """Train on X's records as private ones, with public records given or drawn from X.

        Parameters
        ----------
        X : array-like, shape (m, d)
            Numbers; a pandas DataFrame's category, object and string columns are one-hot encoded, with the
            categories X holds (:mod:`ppsvm.api.columns`).
        y : array-like, shape (m,)
            Two distinct labels.
        X_public : array-like, shape (k, d), optional
            Public records (scaling, kernel width and rho come from them alone).
        y_public : array-like, shape (k,), optional
            Their labels, among y's.

        Returns
        -------
        self
        """
        X, y = fit_input(self, X, y, ensure_min_samples=2)
        self.classes_, signed = two_classes(y, type(self).__name__)
        _, run_seed = simulation_seeds(self.random_state)
        noised = self.method != "public-only" and self.mechanism != NON_PRIVATE
        options = DpOptions(
            method=self.method,
            public=Path(),
            mechanism=self.mechanism,
            epsilon=positive_number(self.epsilon, "epsilon") if noised else None,
            n_frequencies=whole_number(self.n_frequencies, "n_frequencies", 1),
            C=None if self.C == "auto" else positive_number(self.C, "C"),
            width_factor=None if self.width_factor == "auto" else positive_number(self.width_factor, "width_factor"),
            threshold_epsilon=None
            if self.threshold_epsilon is None
            else positive_number(self.threshold_epsilon, "threshold_epsilon"),
            seed=run_seed,
            distribute=False,
            allow_noisy=bool(self.allow_noisy),
        )
        public, private = self._public_and_private(X, signed, X_public, y_public, run_seed)
        try:
            self._fit_dp(X, options, public, private, run_seed)
        except (ConfigError, DataError) as refused:
            raise type(refused)(in_api_words(str(refused))) from None
        return self

    def _fit_dp(self, X: np.ndarray, options: DpOptions, public: Dataset, private: Dataset, run_seed: int) -> None:
        """Train the DP model on simulated entities holding ``private`` (public-only: on ``public`` alone)."""
        with advice_as_warnings(2), tempfile.TemporaryDirectory(prefix="ppsvm-fit-") as name:
            work = Path(name)
            records = work / "public.csv"
            every, none = np.arange(len(public.y)), np.empty(0, dtype=np.int64)
            records.write_text(cell_csv(public, every, none, np.arange(X.shape[1]), "classify"), encoding="utf-8")
            if self.method == "public-only":
                self.model_ = train_dp(None, dataclasses.replace(options, public=records))
            else:
                settings = _dp_entity_settings(self.mechanism, options.epsilon, options.threshold_epsilon)
                with simulate(
                    private,
                    work,
                    rows=whole_number(self.row_blocks, "row_blocks", 1),
                    column_blocks=[np.arange(X.shape[1])],
                    task="classify",
                    seed=run_seed,
                    entity_settings=settings,
                ) as federation:
                    # The public records through the entities' schema, vouched for as a data owner would.
                    source = work / "public.toml"
                    write_public_source(work / "cells" / f"{federation.entities[0].id}.toml", records, source)
                    self.model_ = train_dp(federation, dataclasses.replace(options, public=source))

    def _public_and_private(
        self, X: np.ndarray, signed: np.ndarray, X_public: Any, y_public: Any, seed: int
    ) -> tuple[Dataset, Dataset]:
        """The public and the private records (labels +-1): the given public ones, or a share of X drawn at random."""
        if X_public is None:
            if y_public is not None:
                raise ConfigError("y_public was given without X_public")
            count = _public_count(self.public_size, len(signed))
            if min(np.count_nonzero(signed > 0), np.count_nonzero(signed < 0)) < 2:
                raise DataError(
                    "drawing the public records from X needs 2 records of each class (one public, one private); "
                    "y has fewer of one: pass X_public and y_public"
                )
            private, public = train_test_split(
                np.arange(len(signed)), test_size=count, stratify=signed, random_state=seed
            )
            return fit_records(X[public], signed[public]), fit_records(X[private], signed[private])
        if y_public is None:
            raise ConfigError("X_public was given without y_public")
        X_public, labels = later_input(self, X_public), column_or_1d(y_public)
        check_consistent_length(X_public, labels)
        unknown = sorted(set(np.unique(labels).tolist()) - set(self.classes_.tolist()))
        if unknown:
            raise DataError(f"y_public holds labels {unknown[:5]} that y does not: {self.classes_.tolist()}")
        return fit_records(X_public, np.where(labels == self.classes_[1], 1.0, -1.0)), fit_records(X, signed)

    def decision_function(self, X: Any) -> np.ndarray:
        """w' zhat(x) (or the public-only SVM's value) for each row; positive values predict ``classes_[1]``.

        Parameters
        ----------
        X : array-like, shape (m, n_features_in_)

        Returns
        -------
        ndarray, shape (m,)
        """
        check_is_fitted(self)
        return self.model_.decision(later_input(self, X))

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        # The released weights carry noise from the OS generator, which no random_state repeats.
        tags.non_deterministic = self.method != "public-only" and self.mechanism != NON_PRIVATE
        return tags


def _public_count(public_size: Any, m: int) -> int:
    """How many of m records are public: a share (at least 2, so that both classes can be public) or a count.

    Raises
    ------
    ConfigError
        Neither a share in (0, 1) nor a whole number, or fewer than 2 records left public or private.
    """
    if isinstance(public_size, float) and 0 < public_size < 1:
        count = max(2, math.ceil(public_size * m))
    elif isinstance(public_size, numbers.Integral) and not isinstance(public_size, bool):
        count = int(public_size)
    else:
        raise ConfigError(f"public_size must be a share in (0, 1) or a whole number of records, got {public_size!r}")
    if not 2 <= count <= m - 2:
        raise ConfigError(
            f"public_size = {public_size!r} makes {count} of the {m} records public; the public and the private "
            "records need at least 2 each, one of each class"
        )
    return count


def _dp_entity_settings(mechanism: str, epsilon: float | None, threshold_epsilon: float | None) -> str:
    """The simulated entities' ``[privacy]`` table: the DP protocol, a budget of exactly the weights and the
    threshold releases, and the consent a mechanism other than Laplace needs (whoever simulates holds every
    entity's data, so it is theirs)."""
    # The charges themselves, as decimals of whole micro-epsilons: the guard admits exactly these releases.
    charges = [e for e in (epsilon, threshold_epsilon) if e is not None]
    budget = epsilon_of(sum(epsilon_micro(e) for e in charges))
    lines = ["", "[privacy]", 'mode = "dp"', f"epsilon_total = {budget!r}"]
    if mechanism == NON_PRIVATE:
        lines.append(f"{NON_PRIVATE_WEIGHTS_KEY} = true")
    if mechanism in CONTINUOUS_NOISE_MECHANISMS:
        lines.append(f"{CONTINUOUS_NOISE_KEY} = true")
    return "\n".join(lines) + "\n"
