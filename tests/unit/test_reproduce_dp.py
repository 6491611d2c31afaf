"""The pure helpers of ``ppsvm reproduce dp``: options, presets, data loading, statistics, Markdown."""

from __future__ import annotations

import argparse
import logging
import math
from pathlib import Path

import numpy as np
import pytest

from ppsvm.core.linear_svm import train_linear_svm
from ppsvm.errors import ConfigError, DataError
from ppsvm.experiments import dp

# --- options and presets --------------------------------------------------------------------------


def test_quick_and_full_presets() -> None:
    quick = dp.resolve_settings(dp.DpReproduceOptions(quick=True))
    full = dp.resolve_settings(dp.DpReproduceOptions())
    assert quick.seeds == [0, 1] and quick.epsilons == (1.0, 4.0) and quick.timing_repeats == 1
    assert full.seeds == list(range(10)) and full.epsilons == (0.5, 1.0, 2.0, 4.0)
    assert full.public_sizes == (20, 50, 100, 200) and full.other_C == (10.0, 100.0) and full.exact_rows == 1000
    assert (full.timing_public, full.timing_frequencies, full.timing_repeats) == (
        (20, 50, 100, 200),
        (25, 50, 100, 200),
        3,
    )


def test_options_override_the_preset() -> None:
    settings = dp.resolve_settings(
        dp.DpReproduceOptions(
            quick=True,
            repetitions=3,
            epsilons=(4.0, 0.25),
            seed=7,
            other_C=(),
            exact_rows=0,
            raw_capital=True,
            no_timing=True,
        )
    )
    assert settings.seeds == [7, 8, 9]
    assert settings.epsilons == (0.25, 4.0)  # sorted for the tables and the figure
    assert settings.other_C == () and settings.exact_rows == 0 and not settings.log_capital
    assert settings.timing_public == () and settings.timing_frequencies == ()


@pytest.mark.parametrize(
    "changes, flag",
    [
        ({"repetitions": 0}, "--repetitions"),
        ({"epsilons": ()}, "--epsilon"),
        ({"epsilons": (1.0, -1.0)}, "--epsilon"),
        ({"epsilons": (1.0, math.inf)}, "--epsilon"),
        ({"epsilons": (1.0, 1.0)}, "distinct"),
        ({"seed": -1}, "--seed"),
        ({"C": 0.0}, "--C"),
        ({"C": math.nan}, "--C"),
        ({"frequencies": 0}, "--frequencies"),
        ({"other_C": (10.0, -1.0)}, "--other-C"),
        ({"other_C": (1.0,)}, "differ from --C"),
        ({"exact_rows": -1}, "--exact-rows"),
        ({"exact_rows": dp.N_PRIVATE + 1}, "--exact-rows"),
    ],
)
def test_bad_options_raise_config_error(changes: dict, flag: str) -> None:
    with pytest.raises(ConfigError, match=flag):
        dp.DpReproduceOptions(**changes)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    dp.add_parser(parser.add_subparsers(dest="target"))
    return parser.parse_args(["dp", *argv])


def test_parser_defaults_and_lists() -> None:
    args = parse()
    assert args.run is dp.cmd and not args.quick and args.out == Path("ppsvm-results")
    assert args.epsilon is None and args.other_C is None and args.repetitions is None
    args = parse("--quick", "--epsilon", "2", "0.5", "--other-C", "--frequencies", "50", "--no-progress")
    assert args.epsilon == [2.0, 0.5] and args.other_C == [] and args.frequencies == 50 and args.no_progress


def test_cmd_rejects_bad_options_before_any_work(tmp_path: Path) -> None:
    args = parse("--repetitions", "0", "--out", str(tmp_path / "out"))
    with pytest.raises(ConfigError, match="--repetitions"):
        dp.cmd(args)
    assert not (tmp_path / "out").exists()


def test_rerun_command_names_what_differs_from_the_defaults() -> None:
    assert (
        dp.rerun_command(dp.DpReproduceOptions(quick=True, out=Path("x"), no_progress=True))
        == "ppsvm reproduce dp --quick"
    )
    options = dp.DpReproduceOptions(
        repetitions=3,
        epsilons=(0.5, 2.0),
        seed=4,
        C=10.0,
        frequencies=50,
        other_C=(),
        exact_rows=0,
        raw_capital=True,
        no_timing=True,
    )
    assert dp.rerun_command(options) == (
        "ppsvm reproduce dp --repetitions 3 --epsilon 0.5 2 --seed 4 --C 10 "
        "--frequencies 50 --other-C --exact-rows 0 --raw-capital --no-timing"
    )


def test_key_formats_numbers_like_the_json() -> None:
    assert [dp.key(v) for v in (0.5, 1.0, 4.0, 100.0)] == ["0.5", "1", "4", "100"]


# --- data and randomness --------------------------------------------------------------------------


ADULT_ROWS = [
    "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, "
    "Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K",
    "50, ?, 83311, Bachelors, 13, Married-civ-spouse, ?, Husband, White, Male, 0, 1902, 13, ?, >50K",
]


def test_load_adult_features_labels_and_checks(tmp_path: Path) -> None:
    path = tmp_path / "adult.data"
    path.write_text("\n".join(ADULT_ROWS) + "\n\n", encoding="utf-8")
    X, y, names, checks = dp.load_adult(path, log_capital=True)
    assert X.shape == (2, 12) and len(names) == 12
    assert y.tolist() == [-1.0, 1.0]
    np.testing.assert_allclose(X[:, :5], [[39, 13, math.log(2175), 0, 40], [50, 13, 0, math.log(1903), 13]])
    assert X[0, 5 + dp.MARITAL_VALUES.index("Never-married")] == 1 and X[0, 5:].sum() == 1
    assert X[1, 5 + dp.MARITAL_VALUES.index("Married-civ-spouse")] == 1 and X[1, 5:].sum() == 1
    assert checks["rows_with_any_question_mark"] == 1  # '?' only where the features do not look
    assert checks["question_marks_by_column_all"] == {"1": 1, "6": 1, "13": 1}
    raw, _, raw_names, _ = dp.load_adult(path, log_capital=False)
    assert raw[0, 2] == 2174 and raw_names[2] == "capital-gain"


@pytest.mark.parametrize(
    "row, message",
    [
        ("39, State-gov, 77516, Bachelors", "without 15 fields"),
        (
            "?, State-gov, 77516, Bachelors, 13, Never-married, a, b, c, d, 0, 0, 40, US, <=50K",
            "'?' in the columns used",
        ),
        ("39, State-gov, 77516, Bachelors, 13, Single, a, b, c, d, 0, 0, 40, US, <=50K", "marital-status"),
    ],
)
def test_load_adult_refuses_what_it_cannot_use(tmp_path: Path, row: str, message: str) -> None:
    path = tmp_path / "adult.data"
    path.write_text(ADULT_ROWS[0] + "\n" + row + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=message):
        dp.load_adult(path, log_capital=True)


def test_seeded_streams_repeat_and_differ_by_tag() -> None:
    assert np.array_equal(dp.rng(3, dp.TAG_NOISE, 1).random(5), dp.rng(3, dp.TAG_NOISE, 1).random(5))
    assert not np.array_equal(dp.rng(3, dp.TAG_NOISE, 1).random(5), dp.rng(3, dp.TAG_NOISE, 2).random(5))


def test_split_is_a_seeded_partition() -> None:
    m = dp.N_PRIVATE + dp.N_TEST + 500
    entities, test, pool = dp.split_indices(m, 5)
    assert [len(e) for e in entities] == [dp.N_PRIVATE // dp.N_ENTITIES] * dp.N_ENTITIES
    assert len(test) == dp.N_TEST and len(pool) == 500
    assert np.array_equal(np.sort(np.concatenate([*entities, test, pool])), np.arange(m))
    again = dp.split_indices(m, 5)
    assert np.array_equal(again[2], pool) and not np.array_equal(dp.split_indices(m, 6)[2], pool)


# --- pieces of a repetition -----------------------------------------------------------------------


def test_kernel_mse_against_the_cosine_form() -> None:
    rng = np.random.default_rng(0)
    P, rho, gamma = rng.random((30, 4)), rng.normal(size=(16, 4)), 0.7
    i, j = np.array([0, 3, 7, 7]), np.array([1, 9, 2, 7])
    # zhat(x)'zhat(x') = (1/D) sum_k cos(rho_k'(x - x')), written out independently of fourier_features.
    approx = [np.mean(np.cos(rho @ (P[a] - P[b]))) for a, b in zip(i, j, strict=True)]
    exact = [math.exp(-gamma * float(np.sum((P[a] - P[b]) ** 2))) for a, b in zip(i, j, strict=True)]
    expected = np.mean((np.array(approx) - np.array(exact)) ** 2)
    assert dp.kernel_mse(rho, P, i, j, gamma) == pytest.approx(expected, rel=1e-12)
    assert dp.kernel_mse(rho, P, np.array([4]), np.array([4]), gamma) == pytest.approx(0.0, abs=1e-15)


def test_decomposition_check_holds_for_the_product_mechanisms() -> None:
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(60, 8))
    Z /= np.linalg.norm(Z, axis=1, keepdims=True)
    y = np.where(rng.random(60) < 0.5, -1.0, 1.0)
    exact = train_linear_svm(Z, y, 1.0).w
    assert dp.decomposition_check(Z, y, exact, 1.0, 4, 1.0, seed=0) == {"laplace": True, "output-gamma": True}


# --- statistics -----------------------------------------------------------------------------------


def test_mean_std() -> None:
    assert dp.mean_std([1.0, 2.0, 4.0]) == {
        "mean": pytest.approx(7 / 3),
        "std": pytest.approx(math.sqrt(7 / 3)),
        "n": 3,
    }
    assert dp.mean_std([0.8]) == {"mean": 0.8, "std": 0.0, "n": 1}


def test_paired_verdicts_use_two_standard_errors() -> None:
    beats = dp.paired([0.03, 0.02, 0.025, 0.035])
    assert beats["verdict"] == "beats" and beats["wins"] == 4 and beats["n"] == 4
    assert beats["standard_error"] == pytest.approx(np.std([0.03, 0.02, 0.025, 0.035], ddof=1) / 2)
    assert dp.paired([-0.03, -0.02, -0.025])["verdict"] == "loses"
    assert dp.paired([0.03, -0.02, 0.01])["verdict"] == "tie"
    one = dp.paired([-0.01])  # no standard error: the sign decides
    assert one["standard_error"] is None and one["verdict"] == "loses"
    assert dp.close_to(dp.paired([-0.005, -0.006]))["close"] and not dp.close_to(dp.paired([-0.02, -0.03]))["close"]


def test_markdown_table() -> None:
    text = dp.markdown_table(["method", "eps=1"], [["a|b", "0.800 ± 0.010"]])
    assert text.splitlines() == ["| method | eps=1 |", "|:---|---:|", "| a\\|b | 0.800 ± 0.010 |"]
    with pytest.raises(ValueError, match="2 cells"):
        dp.markdown_table(["a", "b", "c"], [["1", "2"]])


def test_with_error() -> None:
    assert dp.with_error(dp.paired([0.02, 0.03])) == "beats (+0.025 ± 0.005, 2/2)"
    assert dp.with_error(dp.paired([0.02])) == "beats (+0.020, 1/1)"


def test_quiet_fits_holds_back_info_and_restores_the_level() -> None:
    logger = logging.getLogger("ppsvm.core")
    before = logger.level
    with dp.quiet_fits():
        assert not logger.isEnabledFor(logging.INFO) or logger.getEffectiveLevel() <= logging.DEBUG
    assert logger.level == before
