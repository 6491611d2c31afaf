"""The 2-D sinc problem of Fung & Mangasarian, Section 4: the function, the two grids, the error measures.

What Section 4 states, and how this module reads it:

- The function (4.16) is the product sinc(x1, x2) = sin(pi x1)/(pi x1) * sin(pi x2)/(pi x2), the
  caption of their Figure 2 repeats it; not sin(||x||)/||x||. Its domain is D = [-3, 3]^2.
- Entity 1 holds 1000 points of an equally spaced grid E1 in S1 = [-1.5, 1.5]^2, entity 2 1000 points
  of an equally spaced grid E2 in S2 = D - S1 (Section 4.1). No square grid has exactly 1000 points, so
  E1 is the 32 x 32 grid of cell centres of S1 (1024 points, spacing 3/32) and E2 the cell centres of a
  37 x 37 grid over D that fall outside S1 (1369 - 19^2 = 1008 points, spacing 6/37): the counts
  nearest 1000 for one spacing in both directions (31 x 31 = 961 and 36 x 36 - 18^2 = 972 are
  further off). Cell centres rather than end points because (4.17) divides by sinc(x): a grid through
  the ends of D (x = +-3) or through x = +-1 or +-2 meets the function's zeros, where (4.17) is
  undefined, while the paper prints finite values. Neither grid has a coordinate at a nonzero integer.
- mbar = 1000 random points, B uniform on [0, 1], features scaled to [0, 1] by the public minimum and
  maximum; mu from MU_SET and nu from NU_SET by cross-validation "in all the algorithms" (Section 4).
- The error (4.17), as printed, is sqrt(sum over E1 u E2 of ((app(x) - sinc(x)) / sinc(x))^2): a sum
  of squared pointwise relative errors, not divided by the number of points. Beside it we report the
  norm ratio ||app - sinc|| / ||sinc|| over the same points (:func:`ppsvm.core.metrics.relative_error`).

The mu values are read two ways (:data:`READINGS`): on the [0, 1]-scaled features, as the text states,
and in the original x units (the same numbers times the squared range of the scaling), which the
report shows is the reading under which the paper's widths can fit the function.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ppsvm.constants import DEFAULT_FOLDS
from ppsvm.data.dataset import Dataset

NAME = "sinc"
# Section 4.1: the printed errors of each entity alone (Figures 3, 4), of the kernel on all data revealed
# (Figure 5) and of Algorithm 3.1 (Figure 6).
PAPER = {"entity1_alone": 5.01, "entity2_alone": 1.05, "revealed": 0.01, "ppa": 0.01}
HALF_WIDTH = 3.0
INNER_HALF_WIDTH = 1.5
N_FEATURES = 2
PAPER_POINTS = 1000
MBAR = 1000
MU_SET = (0.01, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0)
NU_SET = tuple(2.0**k for k in range(-5, 6))
# The paper does not say how many folds; the project's default.
FOLDS = DEFAULT_FOLDS
# Points per axis of E1 (32^2 = 1024) and of the grid over D that E2 is cut from (37^2 - 19^2 = 1008).
INNER_STEPS = 32
OUTER_STEPS = 37
# The plotting grid of the figures: 61 x 61 points over D (spacing 0.1), ends included.
PLOT_STEPS = 61
# The quick run (part of the test suite): 10^2 = 100 and 12^2 - 6^2 = 108 points, mbar 100, a coarse plot.
# Even spacing keeps both grids off sinc's zeros (a cell centre -3 + (2j+1) 3/k is never an integer for even k).
QUICK_INNER_STEPS = 10
QUICK_OUTER_STEPS = 12
QUICK_MBAR = 100
QUICK_PLOT_STEPS = 25
QUICK_MU_SET = (0.2, 2.0)
QUICK_NU_SET = (2.0**-5, 1.0, 2.0**5)
QUICK_FOLDS = 3
FOLD_SEED = 0
SPLIT_SEED = 0
ENTITIES = ("r0c0", "r1c0")
REGIONS = ("S1 = [-1.5,1.5]^2", "S2 = [-3,3]^2 - S1")
TRAIN, PLOT = "train", "plot"
FUNCTION = "sinc(x1, x2) = sin(pi x1)/(pi x1) * sin(pi x2)/(pi x2) (Fung & Mangasarian eq. 4.16)"
# What each of the paper's figures shows (Section 4.1 and the captions).
FIGURES = {
    1: "the two entities' domains S1 and S2 (here with the grids E1 and E2 drawn in)",
    2: "the exact function sinc(x1, x2) of (4.16)",
    3: "the approximation from entity 1's data alone (E1 in S1)",
    4: "the approximation from entity 2's data alone (E2 in S2)",
    5: "the approximation from both entities' data, publicly revealed: the ordinary kernel K(A, A')",
    6: "the approximation from both entities' data kept private: Algorithm 3.1, the random kernel K(A, B')",
}


@dataclass(frozen=True)
class Reading:
    """One reading of the paper's Gaussian widths mu.

    Attributes
    ----------
    key : str
        "stated" or "original-units" (used in file and JSON names).
    label : str
        What it means, for the report.
    """

    key: str
    label: str

    def scaled_width(self, mu: float, feature_range: float) -> float:
        """The width on the [0, 1]-scaled features that this reading gives the paper's ``mu``.

        With x_s = (x - low) / R for every feature, ||x_s - b||^2 = ||x - (low + R b)||^2 / R^2, so mu in
        the original units is mu R^2 on the scaled features.
        """
        return mu if self.key == STATED.key else mu * feature_range**2


STATED = Reading("stated", "mu on the features scaled to [0, 1], as Section 4 states")
ORIGINAL_UNITS = Reading(
    "original-units", "ours: the same mu values on the original x coordinates (mu R^2 on the scaled features)"
)
READINGS = (STATED, ORIGINAL_UNITS)


@dataclass(frozen=True)
class SincData:
    """The records: the training grids E1 and E2, then the plotting grid.

    Attributes
    ----------
    dataset : Dataset
        ids "train-k" (E1 then E2) and "plot-k"; X (m, 2); y = sinc(X), shape (m,).
    kind : ndarray of str, shape (m,)
        TRAIN or PLOT per record.
    region : ndarray of int, shape (m,)
        0 in S1 (entity 1, r0c0), 1 in S2 (entity 2, r1c0).
    axis : ndarray, shape (steps,)
        Coordinates of the plotting grid along each axis; plot point k is (axis[k % steps], axis[k // steps]).
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
    """The product sinc of (4.16), with its limit 1 at a zero coordinate.

    Parameters
    ----------
    X : ndarray, shape (m, 2)

    Returns
    -------
    ndarray, shape (m,)
    """
    return np.sinc(X[:, 0]) * np.sinc(X[:, 1])


def centred_axis(half_width: float, steps: int) -> np.ndarray:
    """The centres of ``steps`` equal cells of [-half_width, half_width]; shape (steps,), spacing 2 half_width/steps."""
    spacing = 2 * half_width / steps
    return -half_width + spacing * (np.arange(steps) + 0.5)


def square_grid(axis: np.ndarray) -> np.ndarray:
    """All points (axis[i], axis[j]), x1 varying fastest; shape (len(axis)^2, 2)."""
    x1, x2 = np.meshgrid(axis, axis)
    return np.column_stack([x1.ravel(), x2.ravel()])


def region_of(X: np.ndarray) -> np.ndarray:
    """0 for points in S1 (its boundary included, S1 being closed), 1 elsewhere; X (m, 2) -> (m,) of int."""
    return (np.abs(X).max(axis=1) > INNER_HALF_WIDTH).astype(np.int64)


def inner_grid(steps: int) -> np.ndarray:
    """E1: the ``steps`` x ``steps`` cell centres of S1; shape (steps^2, 2)."""
    return square_grid(centred_axis(INNER_HALF_WIDTH, steps))


def outer_grid(steps: int) -> np.ndarray:
    """E2: the cell centres of a ``steps`` x ``steps`` grid over D lying outside S1; shape (k, 2)."""
    points = square_grid(centred_axis(HALF_WIDTH, steps))
    return points[region_of(points) == 1]


def plot_grid(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """A regular ``steps`` x ``steps`` grid over D, ends included, x1 varying fastest.

    Returns
    -------
    axis : ndarray, shape (steps,)
    points : ndarray, shape (steps * steps, 2)
        Values of shape (steps * steps,) reshape to (steps, steps) with rows along x2.
    """
    axis = np.linspace(-HALF_WIDTH, HALF_WIDTH, steps)
    return axis, square_grid(axis)


def build_data(inner_steps: int, outer_steps: int, plot_steps: int) -> SincData:
    """E1, then E2 (the training records), then the plotting grid."""
    train = np.vstack([inner_grid(inner_steps), outer_grid(outer_steps)])
    axis, plot = plot_grid(plot_steps)
    X = np.vstack([train, plot])
    kind = np.repeat([TRAIN, PLOT], [len(train), len(plot)])
    ids = np.array([f"{TRAIN}-{k}" for k in range(len(train))] + [f"{PLOT}-{k}" for k in range(len(plot))])
    dataset = Dataset(ids=ids, X=X, y=sinc_2d(X), feature_names=("x1", "x2"), source="2-D sinc on grids")
    return SincData(dataset, kind, region_of(X), axis)


def error_4_17(targets: np.ndarray, predictions: np.ndarray) -> float:
    """Fung & Mangasarian's (4.17) as printed: sqrt(sum_x ((app(x) - f(x)) / f(x))^2).

    Parameters
    ----------
    targets : ndarray, shape (m,)
        f(x) at the points summed over.
    predictions : ndarray, shape (m,)
        app(x) at the same points.

    Returns
    -------
    float
        inf when some f(x) is 0 (the formula divides by it).
    """
    if np.any(targets == 0.0):
        return float("inf")
    return float(np.sqrt(np.sum(((predictions - targets) / targets) ** 2)))
