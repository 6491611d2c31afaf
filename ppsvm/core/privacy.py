"""Privacy rule 3 (docs/design.md section 2): fewer random points than features, and the mbar it sets by default;
rule 8's measured exposure."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ppsvm.core.kernels import gaussian_fetch_width, scale_to_unit
from ppsvm.core.randomness import derive_B
from ppsvm.core.reconstruction import Risk, measure_risk
from ppsvm.errors import PrivacyError

NOT_PRIVATE_BANNER = (
    "NOT PRIVATE: mbar >= n_j for some column block; kernel rows can pin records down "
    "(privacy rule 3 was overridden in an entity config)"
)
MIXED_MODE_WARNING = (
    'serves the random-kernel and the DP protocol for the same records ([privacy] mode = "mixed"): labels, ranges '
    "and kernel blocks are not differentially private, so no epsilon-DP guarantee holds for its records"
)


def default_mbar(widths: Sequence[int], n_train: int) -> int:
    """The papers' rule: min(n_j) - 1 (privacy rule 3), and at most 10% of the training rows.

    Parameters
    ----------
    widths : sequence of int
        n_j of every column block.
    n_train : int
        Training rows.
    """
    return max(1, min(min(widths) - 1, math.ceil(0.1 * n_train)))


def check_mbar(mbar: int, n_features: int, override: bool, who: str) -> bool:
    """Refuse mbar >= n_j unless the entity's own config overrides the guard.

    Parameters
    ----------
    mbar : int
        Requested number of random points.
    n_features : int
        n_j, the width of the column block.
    override : bool
        The entity config's non-private override.
    who : str
        The entity, for the message.

    Returns
    -------
    bool
        True when the request is private (mbar < n_j), False when allowed only by the override.

    Raises
    ------
    PrivacyError
        mbar >= n_j without the override, or mbar < 1.
    """
    if mbar < 1:
        raise PrivacyError(f"entity {who}: mbar must be >= 1, got {mbar}")
    if mbar < n_features:
        return True
    if override:
        return False
    raise PrivacyError(
        f"entity {who} refuses mbar = {mbar}: it holds only n_j = {n_features} features, and with mbar >= n_j "
        f"the kernel rows can reveal its records (privacy rule 3 needs mbar <= {n_features - 1}). "
        "Lower mbar, or merge column blocks."
    )


def single_block_exposure(X_train: np.ndarray, secret: bytes) -> Risk:
    """What a column-block peer recovers from an entity's kernel block on its own, at the largest private mbar.

    The worse of the linear kernel and the Gaussian at the width 1/n_j, mbar = n_j - 1 (the most a block may
    have without the non-private override; the gain grows with mbar), the records' own range as the scaling.
    Measured once, before any request: an entity decides from it whether a block may leave on its own
    (:meth:`ppsvm.entity.cell.EntityCore.single_block_allowed`), so no coordinator picks the view it is measured
    at or reads a figure that moves with one record. The start line and ``ppsvm audit`` show it to its operator.

    Parameters
    ----------
    X_train : ndarray, shape (m, n_j)
        The entity's training records, unscaled.
    secret : bytes
        Its column-block secret (B_j derives from it).
    """
    n = X_train.shape[1]
    scaled = np.clip(scale_to_unit(X_train, X_train.min(axis=0), X_train.max(axis=0)), 0, 1)
    points = derive_B(secret, max(1, n - 1), n)
    risks = [
        measure_risk(scaled, points, "linear", 0.0),
        measure_risk(scaled, points, "gaussian", gaussian_fetch_width(n)),
    ]
    return max(risks, key=lambda risk: risk.gain)
