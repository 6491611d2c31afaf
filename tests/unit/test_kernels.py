"""Blockwise kernel assembly equals the kernel of the pooled data against B = [B_1 ... B_s]."""

from __future__ import annotations

import numpy as np
import pytest

from ppsvm.core.kernels import assemble, gaussian_kernel, kernel, linear_kernel, product_columns, rescale_gaussian
from ppsvm.core.randomness import derive_B

M_ROWS, N_FEATURES, MBAR = 37, 11, 7
MU = 0.3


def reference_linear(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """sum_f a_f b_f with explicit loops over records and random points."""
    out = np.empty((A.shape[0], B.shape[0]))
    for k in range(A.shape[0]):
        for j in range(B.shape[0]):
            out[k, j] = sum(float(a) * float(b) for a, b in zip(A[k], B[j], strict=True))
    return out


def reference_gaussian(A: np.ndarray, B: np.ndarray, mu: float) -> np.ndarray:
    """exp(-mu sum_f (a_f - b_f)^2) by broadcasting differences (no |a|^2 + |b|^2 - 2ab)."""
    diff = A[:, None, :] - B[None, :, :]
    return np.exp(-mu * (diff**2).sum(axis=2))


def uneven_row_cuts(m: int, r: int, rng: np.random.Generator) -> list[np.ndarray]:
    """r non-empty row blocks of visibly different sizes (not np.array_split's near-even split)."""
    if r == 1:
        return [np.arange(m)]
    sizes = np.arange(1, r + 1) * 3  # 3, 6, 9, ... then the rest goes to the last block
    sizes[-1] = m - sizes[:-1].sum()
    assert (sizes > 0).all() and len(set(sizes.tolist())) == r
    perm = rng.permutation(m)  # records of a row block need not be contiguous in A
    return np.split(perm, np.cumsum(sizes)[:-1])


def checkerboard(r: int, s: int):
    rng = np.random.default_rng(100 * r + s)
    A = rng.random((M_ROWS, N_FEATURES))
    col_blocks = np.array_split(np.arange(N_FEATURES), s)
    row_blocks = uneven_row_cuts(M_ROWS, r, rng)
    B_blocks = [derive_B(bytes([j + 1]) * 32, MBAR, len(cols)) for j, cols in enumerate(col_blocks)]
    B = np.hstack(B_blocks)
    return A, B, row_blocks, col_blocks, B_blocks


@pytest.mark.parametrize("r", [1, 2, 3])
@pytest.mark.parametrize("s", [1, 2, 3, 4])
@pytest.mark.parametrize("name", ["linear", "gaussian"])
def test_blockwise_assembly_equals_central_kernel(name: str, r: int, s: int) -> None:
    A, B, row_blocks, col_blocks, B_blocks = checkerboard(r, s)
    assert B.shape == (MBAR, N_FEATURES)
    if s > 2:
        assert len({len(c) for c in col_blocks}) > 1, "column split should be uneven"
    central = reference_linear(A, B) if name == "linear" else reference_gaussian(A, B, MU)

    assembled = np.full((M_ROWS, MBAR), np.nan)
    for rows in row_blocks:
        blocks = [kernel(name, A[np.ix_(rows, cols)], B_j, MU) for cols, B_j in zip(col_blocks, B_blocks, strict=True)]
        for block in blocks:
            assert block.shape == (len(rows), MBAR)
        assembled[rows] = assemble(name, blocks)

    assert not np.isnan(assembled).any()
    assert np.max(np.abs(assembled - central)) <= 1e-12
    # The Gaussian check is only meaningful if the kernel is not ~0 or ~1 everywhere.
    if name == "gaussian":
        assert 0.01 < np.median(central) < 0.99


def test_single_kernels_match_reference() -> None:
    rng = np.random.default_rng(5)
    A, B = rng.random((9, 4)), rng.random((3, 4))
    assert np.max(np.abs(linear_kernel(A, B) - reference_linear(A, B))) <= 1e-12
    assert np.max(np.abs(gaussian_kernel(A, B, 0.7) - reference_gaussian(A, B, 0.7))) <= 1e-12
    # A point equal to a random point has kernel value exactly 1.
    assert gaussian_kernel(B[:1], B, 2.0)[0, 0] == 1.0


def test_assemble_does_not_modify_blocks() -> None:
    rng = np.random.default_rng(6)
    blocks = [rng.random((4, 3)) for _ in range(3)]
    copies = [b.copy() for b in blocks]
    for name in ("linear", "gaussian"):
        assemble(name, blocks)
    for block, copy in zip(blocks, copies, strict=True):
        assert np.array_equal(block, copy)


@pytest.mark.parametrize("mu_to", [0.05, 0.2, 1.5, 4.0])
def test_rescale_gaussian_equals_kernel_at_new_width(mu_to: float) -> None:
    rng = np.random.default_rng(7)
    A, B = rng.random((25, 6)), rng.random((5, 6))
    mu_from = 0.2
    K_from = reference_gaussian(A, B, mu_from)
    rescaled = rescale_gaussian(K_from, mu_from, mu_to)
    direct = reference_gaussian(A, B, mu_to)
    assert rescaled.shape == direct.shape
    assert np.max(np.abs(rescaled - direct) / direct) <= 1e-12


def test_rescale_gaussian_of_assembled_blocks() -> None:
    """The identity holds for the product of blocks too (what the coordinator actually rescales)."""
    A, B, row_blocks, col_blocks, B_blocks = checkerboard(1, 3)
    blocks = [gaussian_kernel(A[:, cols], B_j, 0.1) for cols, B_j in zip(col_blocks, B_blocks, strict=True)]
    rescaled = rescale_gaussian(assemble("gaussian", blocks), 0.1, 0.9)
    direct = reference_gaussian(A, B, 0.9)
    assert np.max(np.abs(rescaled - direct) / direct) <= 1e-12


@pytest.mark.parametrize("widths", [(0.0, 1.0), (1.0, 0.0), (-1.0, 1.0), (1.0, -2.0), (float("nan"), 1.0)])
def test_rescale_gaussian_refuses_bad_widths(widths: tuple[float, float]) -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        rescale_gaussian(np.ones((2, 2)), *widths)


@pytest.mark.parametrize("name", ["linear", "gaussian"])
def test_mismatched_widths_refused(name: str) -> None:
    with pytest.raises(ValueError, match=r"A has 4 features, B has 5"):
        kernel(name, np.zeros((3, 4)), np.zeros((2, 5)), 1.0)


@pytest.mark.parametrize("name", ["linear", "gaussian"])
@pytest.mark.parametrize("shapes", [((4,), (2, 4)), ((3, 4), (4,)), ((2, 3, 4), (2, 4))])
def test_non_2d_refused(name: str, shapes) -> None:
    A, B = np.zeros(shapes[0]), np.zeros(shapes[1])
    with pytest.raises(ValueError, match="must be 2-D"):
        kernel(name, A, B, 1.0)


@pytest.mark.parametrize("mu", [0.0, -0.5, float("nan"), -float("inf")])
def test_gaussian_width_must_be_positive(mu: float) -> None:
    with pytest.raises(ValueError, match="mu must be > 0"):
        gaussian_kernel(np.zeros((2, 3)), np.zeros((1, 3)), mu)
    with pytest.raises(ValueError, match="mu must be > 0"):
        kernel("gaussian", np.zeros((2, 3)), np.zeros((1, 3)), mu)


def test_unknown_kernel_name_refused() -> None:
    with pytest.raises(ValueError, match="unknown kernel 'polynomial'"):
        kernel("polynomial", np.zeros((2, 3)), np.zeros((1, 3)))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown kernel 'polynomial'"):
        assemble("polynomial", [np.ones((2, 3)), np.ones((2, 3))])  # type: ignore[arg-type]


def test_unknown_kernel_name_refused_for_single_block() -> None:
    with pytest.raises(ValueError, match="unknown kernel"):
        assemble("polynomial", [np.ones((2, 3))])  # type: ignore[arg-type]


def test_blocks_of_different_shapes_refused() -> None:
    with pytest.raises(ValueError, match=r"\(4, 7\).*\(5, 7\)"):
        assemble("linear", [np.ones((5, 7)), np.ones((4, 7))])
    with pytest.raises(ValueError, match=r"\(5, 6\).*\(5, 7\)"):
        assemble("gaussian", [np.ones((5, 7)), np.ones((5, 7)), np.ones((5, 6))])


def test_no_blocks_refused() -> None:
    with pytest.raises(ValueError, match="no kernel blocks"):
        assemble("linear", [])


# ---------------------------------------------------------------- product basis


@pytest.mark.parametrize("name", ["linear", "gaussian"])
def test_product_columns_equal_the_kernel_against_the_combined_points(name: str) -> None:
    """Column c of the assembled blocks is the kernel against [B_1[k_1] ... B_s[k_s]], computed centrally."""
    rng = np.random.default_rng(7)
    widths, mbar, mu = (3, 4, 2), 2, 0.7
    A = rng.random((9, sum(widths)))
    B_blocks = [derive_B(bytes([j]) * 16, mbar, n_j) for j, n_j in enumerate(widths)]
    columns = product_columns(mbar, len(widths), 8, seed=3)
    edges = np.cumsum((0, *widths))
    blocks = [kernel(name, A[:, edges[j] : edges[j + 1]], B_j, mu) for j, B_j in enumerate(B_blocks)]
    points = np.hstack([B_j[columns[:, j]] for j, B_j in enumerate(B_blocks)])
    np.testing.assert_allclose(assemble(name, blocks, columns), kernel(name, A, points, mu), rtol=0, atol=1e-12)
    # The first mbar columns are the paper's kernel against B = [B_1 ... B_s].
    np.testing.assert_allclose(assemble(name, blocks, columns)[:, :mbar], assemble(name, blocks), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("mbar", "s", "count", "expected"),
    [
        (3, 4, 40, 40),
        (2, 3, 100, 8),
        (5, 1, 50, 5),
        (4, 2, 1, 4),
        (2, 8, 52, 52),
        (33, 8, 35, 35),
    ],
)
def test_product_columns_shape_order_and_distinctness(mbar: int, s: int, count: int, expected: int) -> None:
    columns = product_columns(mbar, s, count, seed=0)
    assert columns.shape == (expected, s)
    assert (columns[:mbar] == np.arange(mbar)[:, None]).all()  # the paper's points first
    assert len({tuple(row) for row in columns.tolist()}) == expected
    assert columns.min() >= 0 and columns.max() < mbar
    np.testing.assert_array_equal(columns, product_columns(mbar, s, count, seed=0))


def test_product_columns_depend_on_the_seed_only_beyond_the_paper_points() -> None:
    a, b = product_columns(3, 4, 20, seed=0), product_columns(3, 4, 20, seed=1)
    np.testing.assert_array_equal(a[:3], b[:3])
    assert not np.array_equal(a, b)


def test_columns_of_the_wrong_width_are_refused() -> None:
    blocks = [np.ones((2, 3)), np.ones((2, 3))]
    with pytest.raises(ValueError, match="expected \\(p, 2\\)"):
        assemble("linear", blocks, np.zeros((4, 3), dtype=np.int64))


@pytest.mark.parametrize("name", ["linear", "gaussian"])
def test_combine_into_places_rows_and_columns_like_assemble(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks in each entity's own row order, folded into one array in place, equal assemble() of aligned blocks;
    chunks smaller than a block change nothing."""
    import ppsvm.core.kernels as kernels

    monkeypatch.setattr(kernels, "_COMBINE_CHUNK_ROWS", 7)
    rng = np.random.default_rng(3)
    blocks = [rng.random((50, 4)) for _ in range(3)]
    columns = np.array([[0, 0, 0], [1, 2, 3], [3, 1, 0], [2, 2, 2], [0, 3, 1]])
    orders = [rng.permutation(50) for _ in blocks]  # entity j's row k is aligned row orders[j][k]
    for picked in (None, columns):
        out = kernels.assembly_start(name, (50, 4 if picked is None else len(columns)))
        for j, (block, order) in enumerate(zip(blocks, orders, strict=True)):
            shuffled = np.empty_like(block)
            shuffled[np.arange(50)] = block[order]  # what the entity sends: its rows in its own order
            kernels.combine_into(name, out, shuffled, None if picked is None else picked[:, j], order)
        np.testing.assert_allclose(out, kernels.assemble(name, blocks, picked), rtol=1e-15, atol=0)


def test_rescale_in_place_overwrites() -> None:
    K = np.random.default_rng(0).random((5, 3))
    expected = K**3.0
    result = rescale_gaussian(K, 0.1, 0.3, in_place=True)
    assert result is K
    np.testing.assert_allclose(K, expected, rtol=1e-14)
