"""The pure parts of ``ppsvm reproduce sinc``: data, regions, plotting grid, grid edges, options."""

from __future__ import annotations

import numpy as np
import pytest

from ppsvm.errors import ConfigError
from ppsvm.experiments.sinc.command import SincOptions
from ppsvm.experiments.sinc.models import best, grid_edge
from ppsvm.experiments.sinc.problem import (
    GRID,
    HALF_WIDTH,
    INNER_HALF_WIDTH,
    MBARS,
    QUICK_MBARS,
    TEST,
    TRAIN,
    build_data,
    plot_grid,
    region_of,
    region_points,
    sinc_2d,
)
from ppsvm.experiments.sinc.report import edge_text


def test_sinc_is_the_product_form_with_value_one_at_the_origin() -> None:
    X = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, 0.5], [-0.5, 2.5]])
    expected = [
        1.0,
        0.0,
        (np.sin(np.pi / 2) / (np.pi / 2)) ** 2,
        np.sin(-np.pi / 2) / (-np.pi / 2) * np.sin(2.5 * np.pi) / (2.5 * np.pi),
    ]
    np.testing.assert_allclose(sinc_2d(X), expected, atol=1e-15)


def test_region_points_fall_in_their_regions_and_are_seeded() -> None:
    X, region = region_points(np.random.default_rng(0), 200)
    assert X.shape == (400, 2)
    assert region.tolist() == [0] * 200 + [1] * 200
    np.testing.assert_array_equal(region_of(X), region)
    assert np.abs(X).max() <= HALF_WIDTH
    again, _ = region_points(np.random.default_rng(0), 200)
    np.testing.assert_array_equal(X, again)


def test_region_boundary_belongs_to_the_inner_square() -> None:
    X = np.array([[INNER_HALF_WIDTH, -INNER_HALF_WIDTH], [INNER_HALF_WIDTH + 1e-9, 0.0], [0.0, -3.0]])
    assert region_of(X).tolist() == [0, 1, 1]


def test_plot_grid_is_row_major_with_x1_fastest() -> None:
    axis, points = plot_grid(5)
    np.testing.assert_allclose(axis, [-3.0, -1.5, 0.0, 1.5, 3.0])
    assert points.shape == (25, 2)
    np.testing.assert_array_equal(points[1], [axis[1], axis[0]])
    np.testing.assert_array_equal(points[5], [axis[0], axis[1]])
    values = sinc_2d(points).reshape(5, 5)
    x1, x2 = np.meshgrid(axis, axis)
    np.testing.assert_array_equal(values, np.sinc(x1) * np.sinc(x2))


def test_build_data_holds_training_fresh_and_grid_points_with_ids_by_kind() -> None:
    data = build_data(count=10, steps=7)
    assert [int(data.mask(kind).sum()) for kind in (TRAIN, TEST, GRID)] == [20, 20, 49]
    assert [int(data.mask(TRAIN, k).sum()) for k in (0, 1)] == [10, 10]
    np.testing.assert_array_equal(data.region, region_of(data.dataset.X))
    np.testing.assert_array_equal(data.dataset.y, sinc_2d(data.dataset.X))
    grid_ids = data.dataset.ids[data.mask(GRID)].tolist()
    assert grid_ids == [f"grid-{k}" for k in range(49)]
    np.testing.assert_array_equal(data.dataset.X[data.mask(GRID)], plot_grid(7)[1])
    assert len(set(data.dataset.ids.tolist())) == len(data.dataset.ids)


def test_grid_edge_names_the_low_and_high_ends_only() -> None:
    grid = [1e-7, 1e-3, 10.0]
    assert grid_edge(1e-7, grid) == "low"
    assert grid_edge(10.0 * (1 + 1e-12), grid) == "high"
    assert grid_edge(1e-3, grid) is None
    assert grid_edge(5.0, [5.0]) is None  # one fixed value was not searched
    assert edge_text({"nu": "low", "mu": None}) == "nu low"
    assert edge_text({"nu": None, "mu": None}) == "—"


def test_best_takes_the_first_of_equal_scores() -> None:
    assert best([0.3, 0.1, 0.1]) == 1


def test_options_defaults_and_quick() -> None:
    assert SincOptions().mbars == MBARS
    assert SincOptions(quick=True).mbars == QUICK_MBARS
    assert SincOptions(quick=True, mbar=(1, 2)).mbars == (1, 2)
    assert SincOptions(quick=True).points_per_entity < SincOptions().points_per_entity
    assert SincOptions(quick=True).plot_steps < SincOptions().plot_steps


@pytest.mark.parametrize(
    "changes",
    [
        {"mbar": ()},
        {"mbar": (0,)},
        {"mbar": (3, 3)},
        {"mbar": (True,)},
        {"extra_mu_times_n": (-1.0,)},
        {"extra_mu_times_n": (float("nan"),)},
        {"alone_basis_fraction": 0.0},
        {"alone_basis_fraction": 1.5},
    ],
)
def test_options_refuse_bad_settings(changes: dict) -> None:
    with pytest.raises(ConfigError):
        SincOptions(**changes)
