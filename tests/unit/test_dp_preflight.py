"""The DP preflight: mode, budget and expected noise checked from public facts before anything is computed or spent."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppsvm.coordinator.dp_train import DpOptions, check_preflight, preflight
from ppsvm.core.dp import expected_noise_norm, weight_bound
from ppsvm.errors import ConfigError, PrivacyError
from ppsvm.wire.rpc import ppsvm_pb2 as pb


def metadata(n: int = 9_000, mode: str = "dp", total: float = 5.0, spent: float = 0.0) -> dict[str, pb.BlockMetadata]:
    return {
        f"r{i}c0": pb.BlockMetadata(
            entity_id=f"r{i}c0", n_train=n + i, mode=mode, epsilon_total=total, epsilon_spent=spent
        )
        for i in range(3)
    }


def options(**changes: object) -> DpOptions:
    settings: dict[str, object] = {"method": "dp-hybrid", "public": Path("public.csv"), "epsilon": 1.0, "C": None}
    return DpOptions(**{**settings, **changes})  # type: ignore[arg-type]


def test_the_report_holds_each_entitys_public_facts() -> None:
    report = preflight(metadata(), options(C=10.0))
    assert report["charge"] == pytest.approx(1.1) and report["C"] == 10.0
    facts = report["entities"]["r1c0"]
    expected = expected_noise_norm("laplace", C=10.0, n=9_001, n_frequencies=100, epsilon=1.0)
    assert facts["n_train"] == 9_001 and facts["mode"] == "dp" and facts["epsilon_left"] == 5.0
    assert facts["noise_norm"] == expected and facts["noise_to_bound"] == expected / weight_bound(10.0)
    # C chosen on the public records: judged at the smallest candidate, where the noise is lowest.
    assert preflight(metadata(), options())["C"] == 0.1
    check_preflight(report, options(C=10.0))


def test_an_entity_that_serves_kernels_only_is_named() -> None:
    facts = metadata()
    facts["r2c0"].mode = "random-kernel"
    with pytest.raises(ConfigError, match=r"entities r2c0 serve the random-kernel protocol"):
        check_preflight(preflight(facts, options()), options())


def test_a_budget_too_small_for_the_weights_and_the_threshold_is_refused() -> None:
    with pytest.raises(PrivacyError, match=r"charges epsilon 1.1 .* r0c0 \(1.05 left\)"):
        check_preflight(preflight(metadata(total=1.05), options()), options())
    check_preflight(preflight(metadata(total=1.1), options()), options())
    # Without noise nothing is charged.
    unnoised = options(mechanism="none", epsilon=None)
    check_preflight(preflight(metadata(total=0.0), unnoised), unnoised)


def test_noise_that_dominates_is_refused_unless_allowed() -> None:
    small = metadata(n=200)
    report = preflight(small, options(C=1.0))
    assert all(facts["noise_to_bound"] > 1 for facts in report["entities"].values())
    with pytest.raises(ConfigError, match=r"mostly noise at r0c0 \(200 records: noise .* vs weights <= 1.41\)"):
        check_preflight(report, options(C=1.0))
    check_preflight(report, options(C=1.0, allow_noisy=True))
    # Output perturbation's noise is smaller: at 9,000 records even C = 100 passes.
    gamma = options(C=100.0, mechanism="output-gamma")
    check_preflight(preflight(metadata(), gamma), gamma)
