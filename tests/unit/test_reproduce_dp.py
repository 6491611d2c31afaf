"""The pure helpers of ``ppsvm reproduce dp``: options, presets, data loading, statistics, Markdown."""

from __future__ import annotations

import argparse
import hashlib
import logging
import math
from pathlib import Path

import numpy as np
import pytest

from ppsvm.errors import ConfigError, DataError
from ppsvm.experiments import adult
from ppsvm.experiments.dp import command, report, runs, setting, stats

# --- options and presets --------------------------------------------------------------------------


def test_quick_and_full_presets() -> None:
    quick = setting.resolve_settings(setting.DpReproduceOptions(quick=True))
    full = setting.resolve_settings(setting.DpReproduceOptions())
    assert quick.seeds == [0, 1] and quick.epsilons == (1.0, 4.0) and quick.timing_repeats == 1
    assert full.seeds == list(range(10)) and full.epsilons == (0.5, 1.0, 2.0, 4.0)
    assert full.public_sizes == (20, 50, 100, 200) and full.other_C == (10.0, 100.0) and full.exact_rows == 1000
    assert (full.timing_public, full.timing_frequencies, full.timing_repeats) == (
        (20, 50, 100, 200),
        (25, 50, 100, 200),
        3,
    )


def test_options_override_the_preset() -> None:
    settings = setting.resolve_settings(
        setting.DpReproduceOptions(
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
        ({"exact_rows": setting.N_PRIVATE + 1}, "--exact-rows"),
    ],
)
def test_bad_options_raise_config_error(changes: dict, flag: str) -> None:
    with pytest.raises(ConfigError, match=flag):
        setting.DpReproduceOptions(**changes)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    command.add_parser(parser.add_subparsers(dest="target"))
    return parser.parse_args(["dp", *argv])


def test_parser_defaults_and_lists() -> None:
    args = parse()
    assert args.run is command.cmd and not args.quick and args.out == Path("ppsvm-results")
    assert args.epsilon is None and args.other_C is None and args.repetitions is None
    args = parse("--quick", "--epsilon", "2", "0.5", "--other-C", "--frequencies", "50", "--no-progress")
    assert args.epsilon == [2.0, 0.5] and args.other_C == [] and args.frequencies == 50 and args.no_progress


def test_cmd_rejects_bad_options_before_any_work(tmp_path: Path) -> None:
    args = parse("--repetitions", "0", "--out", str(tmp_path / "out"))
    with pytest.raises(ConfigError, match="--repetitions"):
        command.cmd(args)
    assert not (tmp_path / "out").exists()


def test_rerun_command_names_what_differs_from_the_defaults() -> None:
    assert (
        command.rerun_command(setting.DpReproduceOptions(quick=True, out=Path("x"), no_progress=True))
        == "ppsvm reproduce dp --quick"
    )
    options = setting.DpReproduceOptions(
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
    assert command.rerun_command(options) == (
        "ppsvm reproduce dp --repetitions 3 --epsilon 0.5 2 --seed 4 --C 10 "
        "--frequencies 50 --other-C --exact-rows 0 --raw-capital --no-timing"
    )


def test_key_formats_numbers_like_the_json() -> None:
    assert [setting.key(v) for v in (0.5, 1.0, 4.0, 100.0)] == ["0.5", "1", "4", "100"]


# --- data and randomness --------------------------------------------------------------------------


ADULT_ROWS = [
    "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, "
    "Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K",
    "50, ?, 83311, Bachelors, 13, Married-civ-spouse, ?, Husband, White, Male, 0, 1902, 13, ?, >50K",
]


def test_load_adult_features_labels_and_checks(tmp_path: Path) -> None:
    path = tmp_path / "adult.data"
    path.write_text("\n".join(ADULT_ROWS) + "\n\n", encoding="utf-8")
    data = adult.load_adult(path, log_capital=True)
    X, y, names, checks = data.X, data.y, data.names, data.checks
    assert X.shape == (2, 12) and len(names) == 12
    assert y.tolist() == [-1.0, 1.0]
    np.testing.assert_allclose(X[:, :5], [[39, 13, math.log(2175), 0, 40], [50, 13, 0, math.log(1903), 13]])
    assert X[0, 5 + adult.MARITAL_VALUES.index("Never-married")] == 1 and X[0, 5:].sum() == 1
    assert X[1, 5 + adult.MARITAL_VALUES.index("Married-civ-spouse")] == 1 and X[1, 5:].sum() == 1
    assert checks["rows_with_any_question_mark"] == 1  # '?' only where the features do not look
    assert checks["question_marks_by_column_all"] == {"1": 1, "6": 1, "13": 1}
    raw = adult.load_adult(path, log_capital=False)
    assert raw.X[0, 2] == 2174 and raw.names[2] == "capital-gain"
    assert raw.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


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
        adult.load_adult(path, log_capital=True)


def test_seeded_streams_repeat_and_differ_by_tag() -> None:
    assert np.array_equal(
        setting.rng(3, setting.TAG_EXACT, 1).random(5), setting.rng(3, setting.TAG_EXACT, 1).random(5)
    )
    assert not np.array_equal(
        setting.rng(3, setting.TAG_EXACT, 1).random(5), setting.rng(3, setting.TAG_EXACT, 2).random(5)
    )


def test_split_is_a_seeded_partition() -> None:
    m = setting.N_PRIVATE + setting.N_TEST + 500
    private, test, pool = setting.split_indices(m, 5)
    assert len(private) == setting.N_PRIVATE and len(test) == setting.N_TEST and len(pool) == 500
    assert np.array_equal(np.sort(np.concatenate([private, test, pool])), np.arange(m))
    again = setting.split_indices(m, 5)
    assert np.array_equal(again[2], pool) and not np.array_equal(setting.split_indices(m, 6)[2], pool)


# --- pieces of a repetition -----------------------------------------------------------------------


def test_kernel_mse_against_the_cosine_form() -> None:
    rng = np.random.default_rng(0)
    P, rho, gamma = rng.random((30, 4)), rng.normal(size=(16, 4)), 0.7
    i, j = np.array([0, 3, 7, 7]), np.array([1, 9, 2, 7])
    # zhat(x)'zhat(x') = (1/D) sum_k cos(rho_k'(x - x')), written out independently of fourier_features.
    approx = [np.mean(np.cos(rho @ (P[a] - P[b]))) for a, b in zip(i, j, strict=True)]
    exact = [math.exp(-gamma * float(np.sum((P[a] - P[b]) ** 2))) for a, b in zip(i, j, strict=True)]
    expected = np.mean((np.array(approx) - np.array(exact)) ** 2)
    assert runs.kernel_mse(rho, P, i, j, gamma) == pytest.approx(expected, rel=1e-12)
    assert runs.kernel_mse(rho, P, np.array([4]), np.array([4]), gamma) == pytest.approx(0.0, abs=1e-15)


def test_plan_fits_every_row_of_the_tables_once() -> None:
    settings = setting.resolve_settings(setting.DpReproduceOptions(quick=True))
    fits = runs.plan(settings)
    paths = [fit.path for fit in fits]
    assert len(paths) == len(set(paths))
    # Headline: 3 non-private, dp-hybrid x 3 mechanisms and private-svm x Laplace at 2 epsilons, exact, 2 public-only;
    # C = 100: 2 non-private, both methods x 2 mechanisms at 2 epsilons, 2 public-only.
    # Useful configuration: its non-private model and dp-hybrid x 3 mechanisms at 2 epsilons.
    assert len(fits) == (3 + 3 * 2 + 2 + 1 + 2) + (2 + 2 * 2 * 2 + 2) + (1 + 3 * 2)
    assert ("epsilon", "dp-hybrid/objective", "4") in paths and (
        "other_C",
        "100",
        "private-svm/output-gamma",
        "1",
    ) in paths
    pooled = next(fit for fit in fits if fit.path == ("plain", setting.POOLED))
    assert pooled.row_blocks == 1 and pooled.mechanism == "none" and pooled.epsilon is None
    assert all(fit.epsilon is None for fit in fits if fit.mechanism == "none")
    assert all(fit.row_blocks == setting.N_ENTITIES for fit in fits if fit.path[-1] != setting.POOLED)
    no_extras = setting.resolve_settings(setting.DpReproduceOptions(quick=True, other_C=(), exact_rows=0))
    assert len(runs.plan(no_extras)) == 3 + 3 * 2 + 2 + 2 + (1 + 3 * 2)
    useful = [fit for fit in fits if fit.path[0] == "useful"]
    assert all(fit.C == "auto" and fit.width_factor == "auto" for fit in useful)
    assert all(fit.width_factor == 1.0 for fit in fits if fit.path[0] != "useful")


def test_put_builds_the_nested_results() -> None:
    results: dict = {"epsilon": {}}
    runs.put(results, ("epsilon", "dp-hybrid/laplace", "1"), 0.8)
    runs.put(results, ("other_C", "10", "x"), 0.7)
    assert results == {"epsilon": {"dp-hybrid/laplace": {"1": 0.8}}, "other_C": {"10": {"x": 0.7}}}


def test_the_shipped_adult_file_is_the_uci_one() -> None:
    data = adult.load_adult()
    assert data.X.shape == (32_561, 12) and data.checks["positives"] == 7_841
    assert data.sha256 == "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d"


# --- statistics -----------------------------------------------------------------------------------


def test_mean_std() -> None:
    assert stats.mean_std([1.0, 2.0, 4.0]) == {
        "mean": pytest.approx(7 / 3),
        "std": pytest.approx(math.sqrt(7 / 3)),
        "n": 3,
    }
    assert stats.mean_std([0.8]) == {"mean": 0.8, "std": 0.0, "n": 1}


def test_paired_verdicts_use_two_standard_errors() -> None:
    beats = stats.paired([0.03, 0.02, 0.025, 0.035])
    assert beats["verdict"] == "beats" and beats["wins"] == 4 and beats["n"] == 4
    assert beats["standard_error"] == pytest.approx(np.std([0.03, 0.02, 0.025, 0.035], ddof=1) / 2)
    assert stats.paired([-0.03, -0.02, -0.025])["verdict"] == "loses"
    assert stats.paired([0.03, -0.02, 0.01])["verdict"] == "tie"
    one = stats.paired([-0.01])  # no standard error: the sign decides
    assert one["standard_error"] is None and one["verdict"] == "loses"
    assert (
        stats.close_to(stats.paired([-0.005, -0.006]))["close"]
        and not stats.close_to(stats.paired([-0.02, -0.03]))["close"]
    )


def test_markdown_table() -> None:
    text = report.markdown_table(["method", "eps=1"], [["a|b", "0.800 ± 0.010"]])
    assert text.splitlines() == ["| method | eps=1 |", "|:---|---:|", "| a\\|b | 0.800 ± 0.010 |"]
    with pytest.raises(ValueError, match="2 cells"):
        report.markdown_table(["a", "b", "c"], [["1", "2"]])


def test_with_error() -> None:
    assert report.with_error(stats.paired([0.02, 0.03])) == "beats (+0.025 ± 0.005, 2/2)"
    assert report.with_error(stats.paired([0.02])) == "beats (+0.020, 1/1)"


def test_quiet_fits_holds_back_info_and_restores_the_level() -> None:
    core, cell = logging.getLogger("ppsvm.core"), logging.getLogger("ppsvm.entity.cell")
    before = core.level, cell.level
    with command.quiet_fits():
        if logging.getLogger("ppsvm").getEffectiveLevel() > logging.DEBUG:
            assert not core.isEnabledFor(logging.INFO) and not cell.isEnabledFor(logging.WARNING)
            assert cell.isEnabledFor(logging.ERROR)
    assert (core.level, cell.level) == before
