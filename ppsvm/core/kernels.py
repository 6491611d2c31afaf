"""Kernels, their blockwise assembly, and the Gaussian width identity.

Entity (i, j) computes K(A_ij, B_j'); the coordinator assembles row block i by
a sum over column blocks (linear) or an elementwise product (Gaussian), which
equals the kernel of the pooled row block against B = [B_1 ... B_s].
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeGuard

import numpy as np
from scipy.spatial.distance import cdist

KernelName = Literal["linear", "gaussian"]
KERNELS: tuple[KernelName, ...] = ("linear", "gaussian")


def is_kernel_name(name: str) -> TypeGuard[KernelName]:
    """Whether ``name`` is one of :data:`KERNELS` (narrows a checked string for the type checker)."""
    return name in KERNELS


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


def assemble(name: KernelName, blocks: Sequence[np.ndarray], columns: np.ndarray | None = None) -> np.ndarray:
    """Combine the column-block kernels of one row block.

    Parameters
    ----------
    name : {"linear", "gaussian"}
    blocks : sequence of ndarray, each shape (m_i, mbar)
        K(A_ij, B_j') for j = 1..s, rows aligned by record.
    columns : ndarray of int, shape (p, s), optional
        Column c combines column ``columns[c, j]`` of block j: the kernel against the point
        [B_1[k_1] ... B_s[k_s]] (see :func:`product_columns`). None: column k of every block,
        the paper's B = [B_1 ... B_s] (p = mbar).

    Returns
    -------
    ndarray, shape (m_i, mbar) or (m_i, p)
        sum_j (linear) or elementwise prod_j (Gaussian) of the selected block columns.
    """
    if not blocks:
        raise ValueError("no kernel blocks to assemble")
    shapes = {block.shape for block in blocks}
    if len(shapes) != 1:
        raise ValueError(f"kernel blocks of one row block differ in shape: {sorted(shapes)}")
    if columns is not None and (columns.ndim != 2 or columns.shape[1] != len(blocks)):
        raise ValueError(f"columns has shape {columns.shape}; expected (p, {len(blocks)}) for {len(blocks)} blocks")
    rows, mbar = blocks[0].shape
    result = assembly_start(name, (rows, mbar if columns is None else len(columns)))
    for j, block in enumerate(blocks):
        combine_into(name, result, block, None if columns is None else columns[:, j])
    return result


def assembly_start(name: KernelName, shape: tuple[int, int]) -> np.ndarray:
    """The neutral element to combine blocks into: zeros for a sum (linear), ones for a product (Gaussian).

    Fortran-ordered (columns contiguous): the LP solver's products K'v and K u and its weighted row blocks
    all run along columns, 2.3 times as fast as over rows at 160,000 x 19 (:mod:`ppsvm.core.ipm`).
    """
    if name not in KERNELS:
        raise ValueError(f"unknown kernel {name!r}; expected one of {', '.join(KERNELS)}")
    return np.zeros(shape, order="F") if name == "linear" else np.ones(shape, order="F")


def combine_into(
    name: KernelName,
    out: np.ndarray,
    block: np.ndarray,
    picks: np.ndarray | None = None,
    rows: np.ndarray | None = None,
) -> None:
    """Add (linear) or multiply (Gaussian) one column block's kernel into ``out``, in place.

    Row chunk by row chunk, so the temporaries stay small however large ``out`` is: the
    coordinator assembles K in one preallocated array (issue 12: peak memory near the size of K).

    Parameters
    ----------
    out : ndarray, shape (m_i, p)
        Started by :func:`assembly_start`.
    block : ndarray, shape (m_i, mbar)
        K(A_ij, B_j'), in the entity's row order.
    picks : ndarray of int, shape (p,), optional
        Which column of ``block`` each column of ``out`` takes (the product basis); None: p = mbar, in order.
    rows : ndarray of int, shape (m_i,), optional
        The row of ``out`` each row of ``block`` belongs to; None: the same order.
    """
    combine = np.add if name == "linear" else np.multiply
    for start in range(0, len(block), _COMBINE_CHUNK_ROWS):
        part = block[start : start + _COMBINE_CHUNK_ROWS]
        if picks is not None:
            part = part[:, picks]
        if rows is None:
            target = out[start : start + len(part)]
            combine(target, part, out=target)
        else:
            where = rows[start : start + len(part)]
            out[where] = combine(out[where], part)


# Rows per step of combine_into: a few MB of temporaries at mbar = 100.
_COMBINE_CHUNK_ROWS = 8192


def product_columns(mbar: int, n_blocks: int, count: int, seed: int) -> np.ndarray:
    """Kernel columns that pair rows of different B_j's: points from the Cartesian product of their rows.

    The coordinator already holds K(A_ij, B_j') for every j; combining column k_j of each
    block gives the kernel against the point [B_1[k_1] ... B_s[k_s]] at no cost to privacy
    (no new request, each entity still publishes mbar < n_j columns). Up to mbar^s points
    instead of mbar.

    Parameters
    ----------
    mbar : int
        Rows of every B_j.
    n_blocks : int
        s, the number of column blocks.
    count : int
        Points wanted; at least mbar (the paper's points come first), at most mbar^s.
    seed : int
        Seed for choosing the other points when mbar^s exceeds ``count``.

    Returns
    -------
    ndarray of int, shape (min(max(count, mbar), mbar^s), n_blocks)
        Row k < mbar is (k, ..., k), the paper's kernel; the rest distinct and random.
    """
    if mbar < 1 or n_blocks < 1:
        raise ValueError(f"mbar and the number of blocks must be >= 1, got {mbar} and {n_blocks}")
    total = mbar**n_blocks
    count = min(max(count, mbar), total)
    chosen = {(k,) * n_blocks: None for k in range(mbar)}
    rng = np.random.default_rng(seed)
    if count > total // 2:
        # Dense: draw from the full list, so the loop below never hunts for the last few points.
        every = np.array(np.unravel_index(rng.permutation(total), (mbar,) * n_blocks)).T
        for point in map(tuple, every.tolist()):
            if len(chosen) == count:
                break
            chosen.setdefault(point, None)
    while len(chosen) < count:
        chosen.setdefault(tuple(rng.integers(0, mbar, n_blocks).tolist()), None)
    return np.array(list(chosen), dtype=np.int64).reshape(count, n_blocks)


def gaussian_fetch_width(n_features: int) -> float:
    """The one Gaussian width a coordinator asks entities for, 1/n for n features in all.

    Entities serve their basis under one pinned width (ppsvm.entity.guard); every other width is a
    power of this one (:func:`rescale_gaussian`). With features scaled to [0, 1] the squared
    distance is at most about n, so exp(-d / n) never underflows.
    """
    return 1.0 / n_features


def rescale_gaussian(K: np.ndarray, mu_from: float, mu_to: float, *, in_place: bool = False) -> np.ndarray:
    """Gaussian kernel at width ``mu_to`` from the one at ``mu_from``: K ** (mu_to / mu_from).

    Lets the coordinator tune mu without asking entities for new blocks
    (docs/design.md section 4). Shape is preserved; ``in_place`` overwrites K instead of
    allocating a second array of its size.
    """
    if not (mu_from > 0 and mu_to > 0):
        raise ValueError(f"Gaussian widths must be > 0, got {mu_from} and {mu_to}")
    if mu_to == mu_from:
        return K
    return np.power(K, mu_to / mu_from, out=K if in_place else None)


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
