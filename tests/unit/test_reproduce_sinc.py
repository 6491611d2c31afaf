"""The pure parts of ``ppsvm reproduce sinc``: the function, the grids, the error measures, the readings of mu."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppsvm.core.kernels import gaussian_kernel, scale_to_unit
from ppsvm.errors import ConfigError
from ppsvm.experiments.sinc.command import PAPER_PROTOCOL, QUICK_PROTOCOL, SincOptions
from ppsvm.experiments.sinc.models import best, choose, feature_range, local_cross_validation
from ppsvm.experiments.sinc.problem import (
    HALF_WIDTH,
    INNER_HALF_WIDTH,
    INNER_STEPS,
    MBAR,
    MU_SET,
    NU_SET,
    ORIGINAL_UNITS,
    OUTER_STEPS,
    PAPER,
    PLOT,
    QUICK_INNER_STEPS,
    QUICK_OUTER_STEPS,
    STATED,
    TRAIN,
    build_data,
    centred_axis,
    error_4_17,
    inner_grid,
    outer_grid,
    plot_grid,
    region_of,
    sinc_2d,
)
from ppsvm.experiments.sinc.report import factor, measure_agreement


def test_sinc_is_the_product_of_one_dimensional_sincs_not_the_radial_form() -> None:
    X = np.array([[0.0, 0.0], [0.5, 0.5], [0.5, 0.0], [-0.5, 2.5], [1.0, 0.3]])
    expected = [1.0, (2 / math.pi) ** 2, 2 / math.pi, (2 / math.pi) * (1 / (2.5 * math.pi)), 0.0]
    np.testing.assert_allclose(sinc_2d(X), expected, rtol=1e-12, atol=1e-15)
    # sin(pi r)/(pi r) with r = ||x|| gives 0.358 at (0.5, 0.5), not the product's 0.405.
    radius = math.hypot(0.5, 0.5)
    assert abs(sinc_2d(X[1:2])[0] - math.sin(math.pi * radius) / (math.pi * radius)) > 0.04


def test_e1_is_the_square_grid_nearest_1000_points_in_s1() -> None:
    E1 = inner_grid(INNER_STEPS)
    assert E1.shape == (1024, 2)
    # 31^2 and 33^2 are further from the paper's 1000 than 32^2.
    assert min((31, 32, 33), key=lambda k: abs(k * k - 1000)) == INNER_STEPS
    assert np.abs(E1).max() < INNER_HALF_WIDTH
    for axis in (0, 1):
        np.testing.assert_allclose(np.diff(np.unique(E1[:, axis])), 3 / 32, rtol=1e-12)
    assert (region_of(E1) == 0).all()


def test_e2_is_the_grid_over_d_outside_s1_nearest_1000_points() -> None:
    E2 = outer_grid(OUTER_STEPS)
    assert E2.shape == (37 * 37 - 19 * 19, 2) == (1008, 2)
    counts = {k: len(outer_grid(k)) for k in (35, 36, 37, 38)}
    assert min(counts, key=lambda k: abs(counts[k] - 1000)) == OUTER_STEPS
    assert (np.abs(E2).max(axis=1) > INNER_HALF_WIDTH).all() and np.abs(E2).max() < HALF_WIDTH
    for axis in (0, 1):
        np.testing.assert_allclose(np.diff(np.unique(E2[:, axis])), 6 / 37, rtol=1e-12)
    assert (region_of(E2) == 1).all()


@pytest.mark.parametrize("steps", [(INNER_STEPS, OUTER_STEPS), (QUICK_INNER_STEPS, QUICK_OUTER_STEPS)])
def test_the_grids_avoid_every_zero_of_sinc_so_4_17_is_defined(steps: tuple[int, int]) -> None:
    points = np.vstack([inner_grid(steps[0]), outer_grid(steps[1])])
    nonzero_integers = (np.abs(points - np.round(points)) < 1e-9) & (np.round(points) != 0)
    assert not nonzero_integers.any()
    assert np.abs(sinc_2d(points)).min() > 1e-4
    # A grid through the ends of D would not: sinc(3) = 0 up to rounding.
    assert abs(sinc_2d(np.array([[HALF_WIDTH, 0.0]]))[0]) < 1e-15


def test_centred_axis_and_plot_grid() -> None:
    np.testing.assert_allclose(centred_axis(1.5, 3), [-1.0, 0.0, 1.0])
    axis, points = plot_grid(5)
    np.testing.assert_allclose(axis, [-3.0, -1.5, 0.0, 1.5, 3.0])
    np.testing.assert_array_equal(points[1], [axis[1], axis[0]])
    np.testing.assert_array_equal(points[5], [axis[0], axis[1]])


def test_build_data_holds_e1_e2_then_the_plotting_grid() -> None:
    data = build_data(4, 6, 7)
    assert [int(data.mask(TRAIN, k).sum()) for k in (0, 1)] == [16, 36 - 16]
    assert int(data.mask(PLOT).sum()) == 49
    np.testing.assert_array_equal(data.dataset.y, sinc_2d(data.dataset.X))
    np.testing.assert_array_equal(data.region, region_of(data.dataset.X))
    assert data.dataset.ids[data.mask(PLOT)].tolist() == [f"plot-{k}" for k in range(49)]
    assert len(set(data.dataset.ids.tolist())) == len(data.dataset.ids)


def test_error_4_17_is_the_root_of_a_sum_of_squared_relative_errors() -> None:
    targets = np.array([0.5, -0.25, 2.0])
    predictions = np.array([0.55, -0.2, 1.0])
    # relative errors 0.1, 0.2, 0.5 (worked out by hand)
    assert error_4_17(targets, predictions) == pytest.approx(math.sqrt(0.01 + 0.04 + 0.25), rel=1e-12)
    # A sum, not a mean: the same errors on twice the points give sqrt(2) times the value.
    twice = error_4_17(np.tile(targets, 2), np.tile(predictions, 2))
    assert twice == pytest.approx(math.sqrt(2) * error_4_17(targets, predictions), rel=1e-12)
    assert error_4_17(np.array([1.0, 0.0]), np.array([1.0, 0.0])) == math.inf
    assert error_4_17(targets, targets) == 0.0


def test_the_paper_constants() -> None:
    assert MU_SET == (0.01, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0)
    assert NU_SET == tuple(2.0**k for k in range(-5, 6)) and len(NU_SET) == 11
    assert NU_SET[0] == 1 / 32 and NU_SET[-1] == 32
    assert MBAR == 1000
    assert PAPER == {"entity1_alone": 5.01, "entity2_alone": 1.05, "revealed": 0.01, "ppa": 0.01}


def test_original_units_width_is_the_same_kernel_in_x_coordinates() -> None:
    rng = np.random.default_rng(0)
    X = rng.uniform(-3, 3, size=(20, 2))
    low, high = X.min(axis=0), X.max(axis=0)
    high[1] = low[1] + (high[0] - low[0])  # one range R for both features
    R = feature_range(np.vstack([low, high]))
    B = rng.random((5, 2))
    mu = 0.6
    on_scaled = gaussian_kernel(scale_to_unit(X, low, high), B, ORIGINAL_UNITS.scaled_width(mu, R))
    in_x_units = np.exp(-mu * ((X[:, None, :] - (low + R * B)[None, :, :]) ** 2).sum(axis=2))
    np.testing.assert_allclose(on_scaled, in_x_units, rtol=1e-10)
    assert STATED.scaled_width(mu, R) == mu


def test_feature_range_needs_one_range() -> None:
    assert feature_range(np.array([[0.0, -1.0], [2.0, 1.0]])) == 2.0
    with pytest.raises(ValueError, match="different ranges"):
        feature_range(np.array([[0.0, 0.0], [2.0, 1.0]]))


def test_choose_takes_the_first_lowest_and_names_set_edges() -> None:
    scores = np.array([[0.5, 0.2, 0.2], [np.nan, 0.3, 0.2]])
    assert best(scores) == (0, 1)
    chosen = choose(scores, (0.1, 0.2), (1.0, 2.0, 4.0))
    assert (chosen["mu"], chosen["nu"], chosen["cv_norm_ratio"]) == (0.1, 2.0, 0.2)
    assert chosen["on_set_edge"] == {"mu": "low", "nu": None}
    assert choose(np.array([[1.0, 0.0]]), (0.5,), (1.0, 2.0))["on_set_edge"] == {"mu": None, "nu": "high"}


def test_local_cross_validation_prefers_a_width_that_can_follow_sinc() -> None:
    X = inner_grid(8)
    y = sinc_2d(X)
    scores = local_cross_validation(X, y, widths=[0.01, 10.0], nus=[2.0**-5], folds=3)
    assert scores.shape == (2, 1)
    assert scores[1, 0] < 0.5 < scores[0, 0]


def test_measure_agreement_picks_the_measure_matching_the_paper() -> None:
    models = {
        "entity1_alone": {"error_4_17": 300.0, "norm_ratio": 5.01},
        "entity2_alone": {"error_4_17": 40.0, "norm_ratio": 1.05},
        "revealed": {"error_4_17": 3.0, "norm_ratio": 0.02},
        "ppa": {"error_4_17": 3.0, "norm_ratio": 0.005},
    }
    agreement = measure_agreement({"stated": models}, 2032)
    entry = agreement["readings"]["stated"]
    assert entry["closer"] == "norm_ratio"
    assert entry["models"]["revealed"]["factor_norm_ratio"] == pytest.approx(2.0)
    assert entry["geometric_mean_factor"]["norm_ratio"] == pytest.approx(math.sqrt(2))  # (1 * 1 * 2 * 2)^(1/4)
    assert agreement["rms_pointwise_relative_error_for_4_17_of_0_01"] == pytest.approx(0.01 / math.sqrt(2032))
    assert factor(0.0, 1.0) == math.inf and factor(math.inf, 1.0) == math.inf


def test_options_default_to_the_paper_protocol() -> None:
    protocol = SincOptions().protocol
    assert protocol == PAPER_PROTOCOL
    assert (protocol.inner_steps, protocol.outer_steps, protocol.mbar, protocol.folds) == (32, 37, 1000, 5)
    assert (protocol.mus, protocol.nus) == (MU_SET, NU_SET)
    quick = SincOptions(quick=True).protocol
    assert quick == QUICK_PROTOCOL and quick.mbar < protocol.mbar and quick.inner_steps < protocol.inner_steps
    assert SincOptions(quick=True, folds=2).protocol.folds == 2


@pytest.mark.parametrize("folds", [1, 0, True, 2.5])
def test_options_refuse_bad_folds(folds: object) -> None:
    with pytest.raises(ConfigError, match="folds"):
        SincOptions(folds=folds)  # type: ignore[arg-type]
