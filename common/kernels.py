"""Kernels, their blockwise assembly, and the Gaussian width identity.

Entity (i, j) computes K(A_ij, B_j'); the coordinator assembles row block i by
a sum over column blocks (linear) or an elementwise product (Gaussian), which
equals the kernel of the pooled row block against B = [B_1 ... B_s].
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from scipy.spatial.distance import cdist

KernelName = Literal["linear", "gaussian"]
KERNELS: tuple[KernelName, ...] = ("linear", "gaussian")


def linear_kernel(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """K(A, B') = A B'.

    Parameters
    ----------
    A : ndarray, shape (m, n)
    B : ndarray, shape (mbar, n)

    Returns
    -------
    ndarray, shape (m, mbar)
    """
    _check_widths(A, B)
    return A @ B.T


def gaussian_kernel(A: np.ndarray, B: np.ndarray, mu: float) -> np.ndarray:
    """K(A, B')_kl = exp(-mu ||A_k - B_l||^2).

    Parameters
    ----------
    A : ndarray, shape (m, n)
    B : ndarray, shape (mbar, n)
    mu : float
        Width, > 0.

    Returns
    -------
    ndarray, shape (m, mbar)
    """
    _check_widths(A, B)
    if not mu > 0:
        raise ValueError(f"Gaussian width mu must be > 0, got {mu}")
    # cdist computes differences directly: no cancellation from |a|^2 + |b|^2 - 2ab.
    return np.exp(-mu * cdist(A, B, "sqeuclidean"))


def kernel(name: KernelName, A: np.ndarray, B: np.ndarray, mu: float = 1.0) -> np.ndarray:
    """Dispatch to :func:`linear_kernel` or :func:`gaussian_kernel` by name; shape (m, mbar)."""
    if name == "linear":
        return linear_kernel(A, B)
    if name == "gaussian":
        return gaussian_kernel(A, B, mu)
    raise ValueError(f"unknown kernel {name!r}; expected one of {', '.join(KERNELS)}")


def assemble(name: KernelName, blocks: Sequence[np.ndarray]) -> np.ndarray:
    """Combine the column-block kernels of one row block.

    Parameters
    ----------
    name : {"linear", "gaussian"}
    blocks : sequence of ndarray, each shape (m_i, mbar)
        K(A_ij, B_j') for j = 1..s, rows aligned by record.

    Returns
    -------
    ndarray, shape (m_i, mbar)
        sum_j K_ij (linear) or prod_j K_ij elementwise (Gaussian).
    """
    if name not in KERNELS:
        raise ValueError(f"unknown kernel {name!r}; expected one of {', '.join(KERNELS)}")
    if not blocks:
        raise ValueError("no kernel blocks to assemble")
    shapes = {block.shape for block in blocks}
    if len(shapes) != 1:
        raise ValueError(f"kernel blocks of one row block differ in shape: {sorted(shapes)}")
    result = np.array(blocks[0], dtype=np.float64, copy=True)
    for block in blocks[1:]:
        if name == "linear":
            result += block
        else:
            result *= block
    return result


def rescale_gaussian(K: np.ndarray, mu_from: float, mu_to: float) -> np.ndarray:
    """Gaussian kernel at width ``mu_to`` from the one at ``mu_from``: K ** (mu_to / mu_from).

    Lets the coordinator tune mu without asking entities for new blocks
    (DESIGN.md section 4). Shape is preserved.
    """
    if not (mu_from > 0 and mu_to > 0):
        raise ValueError(f"Gaussian widths must be > 0, got {mu_from} and {mu_to}")
    if mu_to == mu_from:
        return K
    return np.power(K, mu_to / mu_from)


def _check_widths(A: np.ndarray, B: np.ndarray) -> None:
    if A.ndim != 2 or B.ndim != 2:
        raise ValueError(f"A and B must be 2-D, got shapes {A.shape} and {B.shape}")
    if A.shape[1] != B.shape[1]:
        raise ValueError(f"A has {A.shape[1]} features, B has {B.shape[1]}")


def scale_to_unit(X: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Map features to [0, 1] with per-feature bounds, as the papers do.

    Parameters
    ----------
    X : ndarray, shape (m, n)
    low, high : ndarray, shape (n,)
        Per-feature min and max of the training records; a constant feature maps to 0.

    Returns
    -------
    ndarray, shape (m, n)
        Values of records outside the training range fall outside [0, 1].
    """
    low, high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
    if X.ndim != 2 or low.shape != (X.shape[1],) or high.shape != (X.shape[1],):
        raise ValueError(f"X has shape {X.shape}; scaling bounds have shapes {low.shape} and {high.shape}")
    width = high - low
    return (X - low) / np.where(width > 0, width, 1.0)
