"""The release guard and its log: admission by mode, the basis pin, exact budgets, charge-before-compute."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from ppsvm.config import DEFAULT_MAX_RELEASES_PER_MINUTE, DEFAULT_MIN_FREE_DISK_MB, load_entity_config
from ppsvm.core.release_log import HEAD_SLOT, MICRO_PER_EPSILON, ReleaseLog, create_release_log
from ppsvm.entity.guard import MIN_EPSILON, Basis, ReleaseGuard, epsilon_micro
from ppsvm.entity.metrics import EntityCollector
from ppsvm.errors import CallLimitError, ConfigError, PrivacyError, ReleaseFailed

from .files import write

LOW, HIGH = (0.0, 1.0, -2.0), (1.0, 3.0, 2.0)
GAUSSIAN = Basis("gaussian", 0.25, LOW, HIGH)


def new_log(tmp_path: Path, entity_id: str = "r0c0") -> ReleaseLog:
    path = tmp_path / f"{entity_id}.releases.jsonl"
    create_release_log(path, entity_id)
    return ReleaseLog(path, entity_id)


def guard(
    log: ReleaseLog, mode: str = "random-kernel", epsilon_total: float | None = None, baselines: int = 8
) -> ReleaseGuard:
    return ReleaseGuard(log, mode=mode, epsilon_total=epsilon_total, max_baseline_releases=baselines, who=log.entity_id)


# ------------------------------------------------------------------ the log


def test_missing_log_is_refused_not_recreated(tmp_path: Path) -> None:
    """A deleted log would silently reset what the entity has released: refuse to start instead."""
    with pytest.raises(ConfigError, match="does not exist.*--new-release-log"):
        ReleaseLog(tmp_path / "gone.jsonl", "r0c0")
    assert not (tmp_path / "gone.jsonl").exists()


def test_create_refuses_to_replace_a_history(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append({"rpc": "Records", "peer": "coordinator"})
    with pytest.raises(ConfigError, match="already exists"):
        create_release_log(log.path, "r0c0")
    assert ReleaseLog(log.path, "r0c0").count == 1


def test_records_survive_a_restart_in_order(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    for k in range(3):
        log.append({"rpc": "Records", "peer": f"p{k}"})
    again = list(ReleaseLog(log.path, "r0c0").releases())
    assert [r["peer"] for r in again] == ["p0", "p1", "p2"]
    assert [r["seq"] for r in again] == [1, 2, 3]


@pytest.mark.parametrize("tamper", ["edit", "drop-middle", "swap", "truncate-line", "other-entity"])
def test_a_tampered_log_is_refused(tmp_path: Path, tamper: str) -> None:
    log = new_log(tmp_path)
    for epsilon in (1, 2, 3):
        log.append({"rpc": "DpWeights", "peer": "c", "epsilon_micro": epsilon * 1_000_000})
    lines = log.path.read_bytes().splitlines(keepends=True)
    if tamper == "edit":  # lower a charge to get budget back
        lines[2] = lines[2].replace(b'"epsilon_micro":2000000', b'"epsilon_micro":1')
    elif tamper == "drop-middle":
        del lines[2]
    elif tamper == "swap":
        lines[1], lines[2] = lines[2], lines[1]
    elif tamper == "truncate-line":
        lines[-1] = lines[-1][:10]
    log.path.write_bytes(b"".join(lines))
    with pytest.raises(
        ConfigError, match="other-entity|belongs to entity" if tamper == "other-entity" else "release log"
    ):
        ReleaseLog(log.path, "r9c9" if tamper == "other-entity" else "r0c0")


def test_a_log_cut_back_behind_its_head_is_refused(tmp_path: Path) -> None:
    """Cutting the last lines keeps a valid chain; the head file beside the log still records them."""
    log = new_log(tmp_path)
    for _ in range(3):
        log.append({"rpc": "DpWeights", "peer": "c", "epsilon_micro": 250_000})
    lines = log.path.read_bytes().splitlines(keepends=True)
    log.path.write_bytes(b"".join(lines[:2]))
    with pytest.raises(ConfigError, match="ends at release 1, but its head file records release 3"):
        ReleaseLog(log.path, "r0c0")
    log.path.write_bytes(b"".join(lines))
    (tmp_path / "r0c0.releases.jsonl.head").unlink()
    with pytest.raises(ConfigError, match="has 3 releases but its head file .* is missing"):
        ReleaseLog(log.path, "r0c0")


def log_of_releases(tmp_path: Path, count: int) -> tuple[ReleaseLog, Path]:
    """A log with ``count`` kernel releases, and its head file."""
    log = new_log(tmp_path)
    for _ in range(count):
        log.append({"rpc": "KernelBlock", "peer": "c"})
    return log, tmp_path / "r0c0.releases.jsonl.head"


def test_a_head_slot_torn_by_a_crash_leaves_the_other_slot_to_check_against(tmp_path: Path) -> None:
    log, head = log_of_releases(tmp_path, 4)
    data = bytearray(head.read_bytes())
    assert len(data) == 2 * HEAD_SLOT and json.loads(data[:HEAD_SLOT])["seq"] == 4  # slot seq % 2
    assert json.loads(data[HEAD_SLOT:])["seq"] == 3
    data[10:40] = b"\0" * 30  # release 4's slot torn mid-write
    head.write_bytes(bytes(data))
    assert ReleaseLog(log.path, "r0c0").count == 4  # release 3's slot: the log is not shorter
    lines = log.path.read_bytes().splitlines(keepends=True)
    log.path.write_bytes(b"".join(lines[:3]))  # and a cut behind release 3 is still found
    with pytest.raises(ConfigError, match="ends at release 2, but its head file records release 3"):
        ReleaseLog(log.path, "r0c0")
    head.write_bytes(b"\0" * HEAD_SLOT + b"{not json" + b" " * 100)
    with pytest.raises(ConfigError, match="head file .* cannot be read"):
        ReleaseLog(log.path, "r0c0")


def test_a_head_of_one_unpadded_record_is_read_and_then_kept_in_slots(tmp_path: Path) -> None:
    """Logs written before the head had slots: one JSON record, rewritten whole."""
    log, head = log_of_releases(tmp_path, 2)
    head.write_text(json.dumps({"seq": 2, "digest": log._last_digest}) + "\n")
    again = ReleaseLog(log.path, "r0c0")
    again.append({"rpc": "KernelBlock", "peer": "c"})  # seq 3 goes to slot 1; slot 0 still holds the old record
    assert ReleaseLog(log.path, "r0c0").count == 3
    log.path.write_bytes(b"".join(log.path.read_bytes().splitlines(keepends=True)[:3]))
    with pytest.raises(ConfigError, match="ends at release 2, but its head file records release 3"):
        ReleaseLog(log.path, "r0c0")


def test_a_second_process_serving_the_entity_shares_the_pin_and_the_budget(tmp_path: Path) -> None:
    first = guard(new_log(tmp_path), "mixed", epsilon_total=1.0)
    second = guard(ReleaseLog(first.log.path, "r0c0"), "mixed", epsilon_total=1.0)
    first.charge("KernelBlock", "c", basis=GAUSSIAN, records="train", rows=1, mbar=1)
    first.charge("DpWeights", "c", epsilon=0.75)
    with pytest.raises(PrivacyError, match="pinned by the epoch's first kernel release"):
        second.charge("KernelBlock", "c", basis=Basis("linear", 0.0, LOW, HIGH), records="train", rows=1, mbar=1)
    with pytest.raises(PrivacyError, match="only 0.25 of 1 remains"):
        second.charge("DpWeights", "c", epsilon=0.5)
    assert ReleaseLog(first.log.path, "r0c0").count == 2


# ------------------------------------------------------------------ modes


@pytest.mark.parametrize(
    ("mode", "served", "refused"),
    [
        (
            "random-kernel",
            ["Metadata", "Records", "FeatureRange", "KernelBlock", "LocalBaseline", "AcceptModel"],
            ["DpWeights", "DpEvaluate", "DpScoreHistogram"],
        ),
        (
            "dp",
            ["Metadata", "DpWeights", "DpEvaluate", "DpScoreHistogram", "AcceptModel"],
            ["Records", "FeatureRange", "KernelBlock", "LocalBaseline"],
        ),
        ("mixed", ["Records", "KernelBlock", "DpWeights", "DpEvaluate", "DpScoreHistogram"], []),
    ],
)
def test_each_mode_serves_its_protocol_only(tmp_path: Path, mode: str, served: list[str], refused: list[str]) -> None:
    g = guard(new_log(tmp_path), mode, epsilon_total=1.0)
    for rpc in served:
        g.admit(rpc)
    for rpc in refused:
        with pytest.raises(PrivacyError, match=f"serves the {mode} protocol and refuses {rpc}"):
            g.admit(rpc)


# ------------------------------------------------------------------ the basis pin


def test_first_kernel_release_pins_the_view_for_every_mbar_and_record_set(tmp_path: Path) -> None:
    g = guard(new_log(tmp_path))
    g.charge("KernelBlock", "c", basis=GAUSSIAN, records="train", rows=10, mbar=2)
    g.charge("KernelBlock", "c", basis=GAUSSIAN, records="ids", rows=2, mbar=1)  # same view, other mbar and records
    for other in (
        Basis("linear", 0.0, LOW, HIGH),
        Basis("gaussian", 0.5, LOW, HIGH),
        Basis("gaussian", 0.25, LOW, (1.0, 3.0, 2.5)),
    ):
        with pytest.raises(PrivacyError, match="pinned by the epoch's first kernel release"):
            g.charge("KernelBlock", "c", basis=other, records="train", rows=10, mbar=1)
    assert g.log.count == 2  # refusals record nothing


def test_the_pin_covers_the_largest_mbar_and_survives_a_restart(tmp_path: Path) -> None:
    """B_j at a larger mbar adds points, hence equations, for every record served before (issue 25)."""
    log = new_log(tmp_path)
    g = guard(log)
    g.charge("KernelBlock", "c", basis=GAUSSIAN, records="train", rows=10, mbar=3)
    g.charge("KernelBlock", "c", basis=GAUSSIAN, records="test", rows=4, mbar=2)
    with pytest.raises(PrivacyError, match="at most mbar = 3"):
        g.charge("KernelBlock", "c", basis=GAUSSIAN, records="train", rows=10, mbar=4)
    restarted = guard(ReleaseLog(log.path, "r0c0"))
    assert restarted.pinned_mbar == 3
    with pytest.raises(PrivacyError, match="at most mbar = 3"):
        restarted.charge("KernelBlock", "c", basis=GAUSSIAN, records="train", rows=10, mbar=4)
    assert restarted.log.count == 2


def test_a_nonce_is_answered_once_even_after_a_restart(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    guard(log).charge("KernelBlock", "c", basis=GAUSSIAN, records="train", rows=10, mbar=1, nonce="ab" * 16)
    restarted = guard(ReleaseLog(log.path, "r0c0"))
    with pytest.raises(PrivacyError, match="answered nonce"):
        restarted.charge("KernelBlock", "c", basis=GAUSSIAN, records="train", rows=10, mbar=1, nonce="ab" * 16)
    restarted.charge("KernelBlock", "c", basis=GAUSSIAN, records="train", rows=10, mbar=1, nonce="cd" * 16)


def test_the_pin_survives_a_restart(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    guard(log).charge("KernelBlock", "c", basis=GAUSSIAN, records="train", rows=10, mbar=1)
    restarted = guard(ReleaseLog(log.path, "r0c0"))
    assert restarted.pinned == GAUSSIAN
    with pytest.raises(PrivacyError):
        restarted.charge("KernelBlock", "c", basis=Basis("linear", 0.0, LOW, HIGH), records="train", rows=10, mbar=1)


def test_concurrent_first_requests_pin_one_view(tmp_path: Path) -> None:
    """Two first requests racing with different views: exactly one view is ever served."""
    g = guard(new_log(tmp_path))
    views = [Basis("linear", 0.0, LOW, HIGH), GAUSSIAN] * 8
    outcomes: list[str] = []

    def ask(view: Basis) -> None:
        try:
            g.charge("KernelBlock", "c", basis=view, records="train", rows=1, mbar=1)
            outcomes.append(view.kernel)
        except PrivacyError:
            outcomes.append("refused")

    threads = [threading.Thread(target=ask, args=(v,)) for v in views]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    served = {o for o in outcomes if o != "refused"}
    assert len(served) == 1 and outcomes.count("refused") == 8


# ------------------------------------------------------------------ budgets


def test_budget_counts_in_integer_micro_epsilons(tmp_path: Path) -> None:
    """0.1 + 0.2 + 0.7 spends exactly 1.0; a float sum would land above it and refuse the last part."""
    g = guard(new_log(tmp_path), "dp", epsilon_total=1.0)
    for epsilon in (0.1, 0.2, 0.7):
        g.charge("DpWeights", "c", epsilon=epsilon)
    assert g.remaining_micro == 0
    with pytest.raises(PrivacyError, match="budget exhausted: requested epsilon 0.001 but only 0 of 1 remains"):
        g.charge("DpWeights", "c", epsilon=MIN_EPSILON)


def test_a_budget_admits_a_release_of_exactly_the_budget(tmp_path: Path) -> None:
    """1.001 * 10^6 is 1000999.9999999999 in doubles: a float product rounded down as the budget and up as the
    charge refused a release of exactly the budget, for about 3% of three-decimal budgets (found by the API)."""
    assert 1.001 * MICRO_PER_EPSILON < 1_001_000  # the trap itself
    refused = []
    for thousandths in range(1, 3001, 7):
        epsilon = thousandths / 1000
        (tmp_path / str(thousandths)).mkdir()
        g = guard(new_log(tmp_path / str(thousandths)), "dp", epsilon_total=epsilon)
        try:
            g.charge("DpWeights", "c", epsilon=epsilon)
        except PrivacyError:
            refused.append(epsilon)
        assert g.remaining_micro == 0, epsilon
    assert refused == []


def test_tiny_epsilons_are_charged_at_least_one_micro_epsilon(tmp_path: Path) -> None:
    """The float attack: 1 + 1e-300 == 1, so an exhausted float ledger granted 1e-300 for ever."""
    assert epsilon_micro(1e-300) == 1 and epsilon_micro(5e-324) == 1 and epsilon_micro(0.5) == 500_000
    g = guard(new_log(tmp_path), "dp", epsilon_total=1.0)
    g.charge("DpWeights", "c", epsilon=1.0)
    with pytest.raises(PrivacyError, match="budget exhausted"):
        g.charge("DpWeights", "c", epsilon=1e-300)


def test_spending_survives_a_restart(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    guard(log, "dp", epsilon_total=2.0).charge("DpWeights", "c", epsilon=1.5)
    restarted = guard(ReleaseLog(log.path, "r0c0"), "dp", epsilon_total=2.0)
    assert restarted.remaining_micro == 500_000
    with pytest.raises(PrivacyError, match="only 0.5 of 2 remains"):
        restarted.charge("DpWeights", "c", epsilon=1.0)


def test_no_budget_refuses_dp(tmp_path: Path) -> None:
    with pytest.raises(PrivacyError, match="has no privacy budget"):
        guard(new_log(tmp_path), "random-kernel").charge("DpWeights", "c", epsilon=1.0)


def test_baseline_releases_are_capped(tmp_path: Path) -> None:
    g = guard(new_log(tmp_path), baselines=2)
    g.charge("LocalBaseline", "c")
    g.charge("LocalBaseline", "c")
    with pytest.raises(PrivacyError, match="entity-alone figures 2 times, its limit"):
        g.charge("LocalBaseline", "c")


# ------------------------------------------------------------------ charged before computed


def test_a_failure_after_the_charge_stays_charged_and_says_nothing_of_the_data(tmp_path: Path) -> None:
    """The DpWeights oracle: errors naming the row that overflowed, and a refund on every error."""
    g = guard(new_log(tmp_path), "dp", epsilon_total=1.0)
    g.charge("DpWeights", "c", epsilon=0.5)
    with pytest.raises(ReleaseFailed) as caught, g.touching("DpWeights"):
        raise FloatingPointError("X/Z has non-finite values in K rows (first: row 17, value 3.25)")
    text = str(caught.value)
    assert "DpWeights failed after reading its records; the attempt is charged" in text
    assert "17" not in text and "3.25" not in text and "FloatingPointError" not in text
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert g.remaining_micro == 500_000
    assert json.loads(g.log.path.read_text().splitlines()[-1])["epsilon_micro"] == 500_000


def test_an_epoch_gives_a_new_pin_and_older_epochs_keep_serving_their_own(tmp_path: Path) -> None:
    """Issue 26: another kernel after the operator opens the next epoch; the deployed model's view still served."""
    log = new_log(tmp_path)
    g = ReleaseGuard(log, mode="random-kernel", epsilon_total=None, max_baseline_releases=8, who="r0c0", max_points=14)
    linear = Basis("linear", 0.0, LOW, HIGH)
    with pytest.raises(PrivacyError, match="released no kernel block"):
        g.next_epoch("operator")  # nothing pinned yet: any view may still be chosen without an epoch
    g.charge("KernelBlock", "c", basis=GAUSSIAN, records="train", rows=10, mbar=5)
    with pytest.raises(PrivacyError, match="epoch 0, gaussian"):
        g.charge("KernelBlock", "c", basis=linear, records="train", rows=10, mbar=5)
    with pytest.raises(PrivacyError, match="has not opened"):
        g.charge("KernelBlock", "c", basis=linear, records="train", rows=10, mbar=5, epoch=1)
    assert g.next_epoch("operator") == 1
    g.charge("KernelBlock", "c", basis=linear, records="train", rows=10, mbar=5, epoch=1)
    g.charge("KernelBlock", "c", basis=GAUSSIAN, records="ids", rows=2, mbar=5, epoch=0)  # the old model's rows
    with pytest.raises(PrivacyError, match="pinned by the epoch's first kernel release"):
        g.charge("KernelBlock", "c", basis=linear, records="ids", rows=2, mbar=5, epoch=0)
    restarted = guard(ReleaseLog(log.path, "r0c0"))
    assert (restarted.epoch, restarted.pinned, restarted.points_used()) == (1, linear, 11)


def test_the_points_of_every_epoch_count_together_per_record(tmp_path: Path) -> None:
    g = ReleaseGuard(
        new_log(tmp_path), mode="random-kernel", epsilon_total=None, max_baseline_releases=8, who="r0c0", max_points=14
    )
    g.charge("KernelBlock", "c", basis=GAUSSIAN, records="train", rows=10, mbar=9)
    g.next_epoch("operator")
    with pytest.raises(PrivacyError, match="would release 15 functionals"):  # 9 + 5 + 1 for the second kernel
        g.charge("KernelBlock", "c", basis=Basis("linear", 0.0, LOW, HIGH), records="train", rows=10, mbar=5, epoch=1)
    g.charge("KernelBlock", "c", basis=GAUSSIAN, records="train", rows=10, mbar=5, epoch=1)  # same kernel: 14 points
    with pytest.raises(PrivacyError, match="could release none"):
        g.next_epoch("operator")


# ------------------------------------------------------------------ the rate per caller


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def rated(tmp_path: Path, per_minute: int, clock: Clock, mode: str = "random-kernel") -> ReleaseGuard:
    return ReleaseGuard(
        new_log(tmp_path),
        mode=mode,
        epsilon_total=None,
        max_baseline_releases=8,
        who="r0c0",
        max_releases_per_minute=per_minute,
        clock=clock,
    )


def test_a_caller_over_its_rate_is_refused_with_when_to_retry_and_nothing_written(tmp_path: Path) -> None:
    clock = Clock()
    g = rated(tmp_path, 3, clock)
    for _ in range(3):  # a minute's worth at once
        g.charge("Records", "coordinator")
    before = g.log.path.read_bytes()
    with pytest.raises(CallLimitError) as refused:
        g.charge("Records", "coordinator")
    text = str(refused.value)
    assert text == (
        "entity r0c0 records at most 3 releases a minute from one caller ([privacy] max_releases_per_minute) and "
        "this caller has made them: retry in 20.0 s"
    )
    assert g.log.path.read_bytes() == before and g.log.count == 3 and g.rate_refusals == 1
    g.charge("Records", "auditor")  # another caller counts apart
    clock.now += 17.7
    with pytest.raises(CallLimitError, match=r"retry in 2\.3 s"):
        g.charge("Records", "coordinator")
    clock.now += 2.3
    g.charge("Records", "coordinator")  # one more a third of a minute later, and not two
    with pytest.raises(CallLimitError):
        g.charge("Records", "coordinator")
    assert g.log.count == 5 and g.rate_refusals == 3


def test_refused_calls_spend_no_rate_and_zero_means_unlimited(tmp_path: Path) -> None:
    clock = Clock()
    (tmp_path / "a").mkdir()
    g = rated(tmp_path / "a", 2, clock)
    for _ in range(5):  # refused by the guard: nothing written, nothing counted
        with pytest.raises(PrivacyError):
            g.charge("DpWeights", "coordinator", epsilon=1.0)
    g.charge("Records", "coordinator")
    g.charge("Records", "coordinator")
    assert g.log.count == 2
    (tmp_path / "b").mkdir()
    free = rated(tmp_path / "b", 0, clock)
    for _ in range(200):
        free.charge("Records", "coordinator")
    assert free.log.count == 200 and free.rate_refusals == 0


def test_plaintext_callers_are_counted_by_address_not_by_connection(tmp_path: Path) -> None:
    clock = Clock()
    g = rated(tmp_path, 1, clock)
    g.charge("Records", "ipv4:127.0.0.1:50100")
    with pytest.raises(CallLimitError):
        g.charge("Records", "ipv4:127.0.0.1:50101")  # a new connection is the same caller
    g.charge("Records", "ipv6:[::1]:50102")


def test_callers_long_gone_are_forgotten(tmp_path: Path) -> None:
    clock = Clock()
    g = rated(tmp_path, 2, clock)
    for k in range(300):
        g.charge("Records", f"ipv4:10.0.{k // 250}.{k % 250}:1")
    clock.now += 60  # every bucket full again: as good as new
    g.charge("Records", "coordinator")
    assert len(g._buckets) <= 2


def test_the_limits_are_entity_settings(tmp_path: Path) -> None:
    base = '[entity]\nid = "r0c0"\ndata = "r0c0.csv"\ncolumn_block = 0\nsecret_file = "s.hex"\n'
    config = load_entity_config(write(tmp_path / "a.toml", base))
    assert (config.max_releases_per_minute, config.min_free_disk_mb) == (
        DEFAULT_MAX_RELEASES_PER_MINUTE,
        DEFAULT_MIN_FREE_DISK_MB,
    )
    text = base + "[privacy]\nmax_releases_per_minute = 0\nmin_free_disk_mb = 512\n"
    config = load_entity_config(write(tmp_path / "b.toml", text))
    assert (config.max_releases_per_minute, config.min_free_disk_mb) == (0, 512)
    for key in ("max_releases_per_minute", "min_free_disk_mb"):
        with pytest.raises(ConfigError, match=f"'{key}' must be >= 0"):
            load_entity_config(write(tmp_path / "c.toml", base + f"[privacy]\n{key} = -1\n"))


def test_the_metrics_count_refusals_for_rate_and_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    g = rated(tmp_path, 1, clock)
    g.charge("Records", "coordinator")
    with pytest.raises(CallLimitError):
        g.charge("Records", "coordinator")
    g.log.min_free_disk_mb = 1 << 40  # more than any disk has
    with pytest.raises(ConfigError, match="cannot record releases"):
        g.charge("Records", "auditor")
    families = {family.name: family for family in EntityCollector("r0c0", 0, g).collect()}
    values = {
        name: family.samples[0].value
        for name, family in families.items()
        if name.startswith(("ppsvm_entity_releases_refused", "ppsvm_entity_release_log"))
    }
    assert values == {
        "ppsvm_entity_releases_refused_rate": 1,
        "ppsvm_entity_releases_refused_disk": 1,
        "ppsvm_entity_release_log_write_failures": 0,
    }


def test_a_release_records_its_request_and_run(tmp_path: Path) -> None:
    """Issue 30 item 6: the call's request id and the coordinator's run id go into the release's log record."""
    from ppsvm.logs import call_fields

    g = guard(new_log(tmp_path))
    with call_fields(request_id="req-1", run_id="run-7"):
        record = g.charge("Records", "coordinator", rows=3)
    assert record["request_id"] == "req-1" and record["run_id"] == "run-7"
    plain = g.charge("Records", "coordinator", rows=3)  # outside a call (a tool, a test): neither
    assert "request_id" not in plain and "run_id" not in plain
