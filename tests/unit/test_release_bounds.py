"""Issue 27: no release can fail, or answer differently, on what one record holds, beyond its mechanism's noise.

A failure after the records were read is one exact bit about them (a threshold model whose scaling overflowed on
records above t read a feature's maximum by bisection for 0.29 epsilon). Each test pairs the hostile request with
the records that decide it, and shows the request either refused from its own numbers or answered alike.
"""

from __future__ import annotations

import itertools
import json
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from ppsvm.config import CONTINUOUS_NOISE_KEY, load_entity_config
from ppsvm.core.dp_model import MAX_KERNEL_WIDTH, MAX_THRESHOLD, MAX_WEIGHTS_L1, DpModel
from ppsvm.core.fourier import MAX_RHO_ROW_L1, SCALED_BOX, apply_scaling, phase_range
from ppsvm.core.local_svm import fit_local
from ppsvm.core.noise import integer_source
from ppsvm.entity.cell import BASELINE_MU_RANGE, BASELINE_NU_RANGE, EntityCore
from ppsvm.errors import ConfigError, DataError
from ppsvm.experiments.coordinator_attacks import hostile_dp_models, overflow_model, overflowed

from .files import write

DBL_MAX = np.finfo(np.float64).max
SUBNORMAL = 5e-324


def dp_model(**fields: object) -> DpModel:
    """A valid three-feature dp-hybrid model, with ``fields`` replaced."""
    values: dict[str, object] = {
        "method": "dp-hybrid",
        "mechanism": "laplace",
        "epsilon": 1.0,
        "private": True,
        "low": (0.0, 0.0, 0.0),
        "high": (1.0, 1.0, 1.0),
        "kernel_width": 1.0,
        "C": 1.0,
        "rho": ((1.0, -2.0, 0.5),),
        "weights": (0.3, -0.7),
    }
    values.update(fields)
    return DpModel(**values)  # type: ignore[arg-type]


def public_only(**fields: object) -> DpModel:
    values: dict[str, object] = {
        "method": "public-only",
        "mechanism": "public",
        "epsilon": None,
        "private": False,
        "basis": ((0.1, 0.2, 0.3), (0.9, 0.8, 0.7)),
        "dual_coef": (1.0, -1.0),
        "rho": (),
        "weights": (),
    }
    values.update(fields)
    return dp_model(**values)


# Records an attacker may never see, chosen to overflow whatever the scaling does: huge, tiny, of both signs.
EXTREME_RECORDS = np.array(
    [[0.5, 0.5, 0.5], [1e308, -1e308, 0.0], [-DBL_MAX, DBL_MAX, SUBNORMAL], [1e-300, 3.0, -7.0], [DBL_MAX] * 3]
)


# ---------------------------------------------------------------- the model and its evaluation


def test_scaling_is_finite_and_within_the_box_for_every_record_and_every_finite_scaling() -> None:
    for low, high in [(0.0, SUBNORMAL), (-DBL_MAX, DBL_MAX), (0.0, 1.0 / DBL_MAX), (5.0, 5.0), (-1.0, 3.0)]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # not even a warning: the arithmetic is told what overflow means
            scaled = apply_scaling(EXTREME_RECORDS, np.full(3, low), np.full(3, high))
        assert np.isfinite(scaled).all() and np.abs(scaled).max() <= SCALED_BOX
    X = np.array([[0.25, 2.0, -1.0]])
    assert apply_scaling(X, np.zeros(3), np.full(3, 2.0)).tolist() == [[0.125, 1.0, -0.5]]  # inside: exact


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"low": (0.0, 2.0, 0.0), "high": (1.0, 1.0, 1.0)}, "high >= low"),
        ({"rho": ((MAX_RHO_ROW_L1, 1.0, 0.0),)}, "rho rows of absolute sum"),
        ({"weights": (MAX_WEIGHTS_L1, 1.0)}, "weights of absolute sum"),
        ({"threshold": -2 * MAX_THRESHOLD}, "|threshold|"),
        ({"method": "public-only", "rho": (), "weights": (), "basis": ((1.0,) * 3,), "dual_coef": (2e12,)}, "dual"),
        (
            {"method": "public-only", "rho": (), "weights": (), "basis": ((2e6, 0.0, 0.0),), "dual_coef": (1.0,)},
            "basis",
        ),
        ({"kernel_width": 2 * MAX_KERNEL_WIDTH}, "kernel_width"),
    ],
)
def test_a_model_beyond_the_bounds_is_refused_when_read(fields: dict[str, object], rule: str) -> None:
    document = json.loads(dp_model().to_json())
    document.update({k: [list(r) for r in v] if k in ("rho", "basis") else v for k, v in fields.items()})
    with pytest.raises(ConfigError, match="the model must have .*" + re.escape(rule)):
        DpModel.from_json(json.dumps(document), "received model")


def test_every_model_within_the_bounds_decides_finitely_on_every_record() -> None:
    for model in hostile_dp_models(3):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            decision = model.decision(EXTREME_RECORDS)
        assert decision.shape == (len(EXTREME_RECORDS),) and np.isfinite(decision).all(), model


# ---------------------------------------------------------------- DP releases on neighbouring cells


def dp_core(tmp_path: Path, extreme: float, privacy: str = "") -> EntityCore:
    """A DP entity whose training and held-out records include one with first feature ``extreme``
    (``privacy``: more lines of its [privacy] table)."""
    rng = np.random.default_rng(1)
    lines = ["id,label,split,f1,f2,f3"]
    for i in range(24):
        x = rng.random(3) * (0.5, 1.0, 1.0)  # below the changed record on the probed feature
        lines.append(
            f"r{i},{1 if x[1] > 0.5 else -1},{'test' if i % 4 == 0 else 'train'},{x[0]:.3f},{x[1]:.3f},{x[2]:.3f}"
        )
    lines += [f"big-train,1,train,{extreme!r},0.5,0.5", f"big-test,-1,test,{extreme!r},0.5,0.5"]
    write(tmp_path / "cell.csv", "\n".join(lines) + "\n")
    write(tmp_path / "secret.hex", bytes(range(32)).hex() + "\n")
    config = write(
        tmp_path / "entity.toml",
        '[entity]\nid = "dp-1"\ndata = "cell.csv"\ncolumn_block = 0\nsecret_file = "secret.hex"\n'
        f"[privacy]\nepsilon_total = 100\n{privacy}",
    )
    return EntityCore(load_entity_config(config), new_release_log=True)


def test_objective_weights_with_a_tiny_huber_h_are_refused_from_the_request_before_the_charge(tmp_path: Path) -> None:
    """Below huber_h ~ 1e-277 the exact finish's dual would underflow: refused from the request and n, never as a
    failure after the charge; a sane h is answered (and charged)."""
    core = dp_core(tmp_path, 0.9, privacy=f"{CONTINUOUS_NOISE_KEY} = true\n")
    rho = np.random.default_rng(2).normal(size=(4, 3))
    request = {"method": "random", "mechanism": "objective", "epsilon": 1e-3, "C": 1.0, "rho": rho}
    bounds = {"low": np.zeros(3), "high": np.ones(3)}
    with pytest.raises(DataError, match="raise huber_h"):
        core.dp_weights(**request, **bounds, huber_h=1e-300)
    assert core.guard.state()["releases"] == 0
    release, _ = core.dp_weights(**request, **bounds, huber_h=0.5)
    assert np.isfinite(release.weights).all() and core.guard.state()["releases"] == 1


def test_phase_range_is_the_widest_turn_across_the_box_corners() -> None:
    """Against the corners of the scaled box, enumerated: rho_k'x is linear, so its range over the box is reached
    at corners."""
    rng = np.random.default_rng(4)
    rho, low, high = rng.normal(size=(5, 3)), np.array([0.0, -2.0, 1.0]), np.array([1.0, 2.0, 1.0])
    box = (np.array([-1.0, -3.0, 0.0]), np.array([2.0, 0.0, 4.0]))
    corners = np.array(list(itertools.product(*zip(*box, strict=True))))
    phases = apply_scaling(corners, low, high) @ rho.T
    assert phase_range(rho, low, high, box) == pytest.approx(float((phases.max(0) - phases.min(0)).max()), rel=1e-12)
    unit = np.array(list(itertools.product((0.0, 1.0), repeat=2)))
    phases = unit @ rho[:, :2].T  # no box: the scaling's own [0, 1], nothing for the feature it declares constant
    assert phase_range(rho, low, high, None) == pytest.approx(float((phases.max(0) - phases.min(0)).max()))


def test_frequencies_that_turn_nothing_across_the_box_are_refused_before_the_charge(tmp_path: Path) -> None:
    """Every record would get the same features, and the certified solve degenerates on them (rho = 0 at D = 10,000
    took 320 s): refused from the request alone, uncharged; a spread set is answered."""
    core = dp_core(tmp_path, 0.9)
    rho = np.random.default_rng(2).normal(size=(4, 3))
    request = {"method": "random", "mechanism": "laplace", "epsilon": 1e-3, "C": 1.0, "huber_h": 0.5}
    for collapsed in (np.zeros((4, 3)), rho * 1e-8):
        with pytest.raises(DataError, match="no frequency turns"):
            core.dp_weights(**request, rho=collapsed, low=np.zeros(3), high=np.ones(3))
    core.bounds = (np.zeros(3), np.ones(3))  # a declared box: a scaling that squeezes it collapses the records too
    with pytest.raises(DataError, match="no frequency turns"):
        core.dp_weights(**request, rho=rho, low=np.zeros(3), high=np.full(3, 1e12))
    assert core.guard.state()["releases"] == 0
    release, _ = core.dp_weights(**request, rho=rho, low=np.zeros(3), high=np.ones(3))
    assert np.isfinite(release.weights).all() and core.guard.state()["releases"] == 1


def test_the_threshold_probe_gets_the_same_answers_from_neighbouring_cells(tmp_path: Path) -> None:
    """The issue's oracle: a scaling that overflows exactly on records above t. Two cells that differ in one record
    (its first feature 0.9 or 0.95) get identical answers from the same noise draws, at every t between them and
    around: the count and the histogram are functions of the decisions, and every decision is finite."""
    low_cell, high_cell = dp_core(tmp_path / "a", 0.9), dp_core(tmp_path / "b", 0.95)
    for t in (0.5, 0.89, 0.91, 0.925, 0.94, 0.96, 2.0):
        probe = overflow_model(0, t, 3)
        answers = [
            (
                core.dp_evaluate(probe, 0.01, source=integer_source(np.random.default_rng(7)))["error_rate"],
                core.dp_score_histogram(probe, np.array([0.0]), 0.01, source=integer_source(np.random.default_rng(7))),
            )
            for core in (low_cell, high_cell)
        ]
        assert answers[0] == answers[1], t
        # Control: the bit the old entities answered tells these two cells apart wherever t lies between them.
        old_bits = [overflowed(core.cell.X_train, probe) for core in (low_cell, high_cell)]
        assert (old_bits[0] != old_bits[1]) == (0.9 < t < 0.95), t


def test_a_model_beyond_the_bounds_is_refused_before_anything_is_charged(tmp_path: Path) -> None:
    core = dp_core(tmp_path, 0.9)
    text = dp_model().to_json().replace('"threshold": 0.0', f'"threshold": {4 * MAX_THRESHOLD!r}')
    for call in (
        lambda: core.dp_evaluate(text.encode(), 0.01),
        lambda: core.dp_score_histogram(text.encode(), np.array([0.0]), 0.01),
    ):
        with pytest.raises(ConfigError, match="threshold"):
            call()
    assert core.guard.state()["releases"] == 0


def test_hostile_models_are_answered_by_every_dp_evaluation_on_extreme_records(tmp_path: Path) -> None:
    core = dp_core(tmp_path, float(DBL_MAX))
    for model in hostile_dp_models(3):
        text = model.to_json().encode()
        core.dp_evaluate(text, 0.001)
        core.dp_score_histogram(text, np.array([-1.0, 0.0, 1.0]), 0.001)
    assert core.guard.state()["releases"] == 2 * len(hostile_dp_models(3))


# ---------------------------------------------------------------- LocalBaseline


def baseline_core(tmp_path: Path, labels: str = "classify") -> EntityCore:
    rng = np.random.default_rng(3)
    lines = ["id,label,split,f1,f2"]
    for i in range(40):
        x = rng.random(2)
        label = (1 if x[0] > 0.5 else -1) if labels == "classify" else round(3 * x[0] + x[1], 3)
        lines.append(f"r{i},{label},{'test' if i % 5 == 0 else 'train'},{x[0]:.3f},{x[1]:.3f}")
    write(tmp_path / "cell.csv", "\n".join(lines) + "\n")
    write(tmp_path / "secret.hex", bytes(range(32)).hex() + "\n")
    config = write(
        tmp_path / "entity.toml",
        '[entity]\nid = "alone-1"\ndata = "cell.csv"\ncolumn_block = 0\nsecret_file = "secret.hex"\n',
    )
    return EntityCore(load_entity_config(config), new_release_log=True)


def test_local_baseline_answers_the_task_its_labels_make_in_figures_a_person_reads(tmp_path: Path) -> None:
    classify = baseline_core(tmp_path / "c")
    with pytest.raises(DataError, match="its labels make its task 'classify'; it does not answer 'regress'"):
        classify.local_baseline("regress", "gaussian", 1.0, 0.5, 0)
    figures = classify.local_baseline("classify", "gaussian", 1.0, 0.5, 0)
    assert all(round(figures[name], 3) == figures[name] for name in ("error_rate", "auc"))
    regress = baseline_core(tmp_path / "r", labels="regress")
    with pytest.raises(DataError, match="its labels make its task 'regress'"):
        regress.local_baseline("classify", "gaussian", 1.0, 0.5, 0)
    figures = regress.local_baseline("regress", "gaussian", 1e-3, 0.5, 0)
    assert (
        float(f"{figures['rmse']:.3g}") == figures["rmse"]
        and round(figures["relative_error"], 3) == figures["relative_error"]
    )
    assert classify.guard.state()["releases"] == 1  # the refusal charged nothing


@pytest.mark.parametrize("name", ["nu", "mu"])
def test_local_baseline_refuses_a_fixed_setting_beyond_its_range_before_reading_a_record(
    tmp_path: Path, name: str
) -> None:
    core = baseline_core(tmp_path)
    low, high = BASELINE_NU_RANGE if name == "nu" else BASELINE_MU_RANGE
    for value in (low / 2, high * 2):
        settings = {"nu": 1.0, "mu": 0.5, name: value}
        with pytest.raises(DataError, match=f"{name} must be a number in"):
            core.local_baseline("classify", "gaussian", settings["nu"], settings["mu"], 0)
    assert core.guard.state()["releases"] == 0


def test_the_local_solver_answers_at_every_corner_of_the_allowed_settings() -> None:
    """The ranges' reason: HiGHS stopped as unbounded on some cells at nu = 1e8, mu = 1e-9 (outside them). At the
    corners inside, cells of random records and labels all train, so the answer does not depend on the records."""
    corners = list(itertools.product(BASELINE_NU_RANGE, BASELINE_MU_RANGE))
    for seed, (nu, mu), kernel in itertools.product(range(6), corners, ("gaussian", "linear")):
        rng = np.random.default_rng(seed)
        X, y = rng.random((30, 4)), np.where(rng.random(30) > 0.5, 1.0, -1.0)
        model = fit_local("classify", kernel, X, y, basis_fraction=1.0, nu=nu, mu=mu, seed=seed)
        assert np.isfinite(model.decision(X)).all()
