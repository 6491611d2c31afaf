"""The privacy ledger: budget refusal, two-phase spending, crash safety, persistence, concurrency."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import multiprocessing
import os
import stat
import tempfile
import threading
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.errors import ConfigError, PrivacyError
from entity.ledger import BUDGET_TOLERANCE, LedgerEntry, PrivacyLedger

FORK = multiprocessing.get_context("fork")


def make(directory: Path, total: float = 2.0, entity_id: str = "h1") -> PrivacyLedger:
    return PrivacyLedger(directory / "ledger.json", total, entity_id=entity_id)


def spend(ledger: PrivacyLedger, epsilon: float, purpose: str = "weights") -> None:
    ledger.reserve(epsilon, purpose, "laplace").commit()


def widen_race(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slow every ledger write between its read and its replace, so unlocked writers would collide."""
    real_replace = os.replace

    def slow_replace(source: str, target: Path) -> None:
        time.sleep(0.01)
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", slow_replace)


# -- creation and format -------------------------------------------------------


def test_missing_file_is_empty_and_created_on_first_reserve(tmp_path: Path) -> None:
    ledger = make(tmp_path)
    assert (ledger.spent, ledger.reserved, ledger.remaining, ledger.entries) == (0.0, 0.0, 2.0, ())
    ledger.report(), ledger.summary()
    assert not (tmp_path / "ledger.json").exists()  # queries never create it

    reservation = ledger.reserve(0.5, "hybrid SVM weights, task t1", "laplace output perturbation")
    document = json.loads((tmp_path / "ledger.json").read_text())
    assert {k: document[k] for k in ("format", "version", "entity_id", "total_epsilon")} == {
        "format": "ppsvm-privacy-ledger",
        "version": 1,
        "entity_id": "h1",
        "total_epsilon": 2.0,
    }
    [entry] = document["entries"]
    assert entry["id"] == reservation.id and uuid.UUID(entry["id"]).version == 4
    assert (entry["epsilon"], entry["state"], entry["spent_time"]) == (0.5, "reserved", None)
    assert entry["purpose"] == "hybrid SVM weights, task t1"
    assert entry["mechanism"] == "laplace output perturbation"
    assert datetime.fromisoformat(entry["time"]).utcoffset() == timedelta(0)


def test_missing_directory_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist.*volume is mounted"):
        make(tmp_path / "not-mounted")
    assert not (tmp_path / "not-mounted").exists()


@pytest.mark.parametrize("total", [-1.0, math.nan, math.inf, "2", True])
def test_invalid_total_refused(tmp_path: Path, total: object) -> None:
    with pytest.raises(ConfigError, match="entity h1: total_epsilon must be a finite number >= 0"):
        make(tmp_path, total=total)  # type: ignore[arg-type]


def test_entries_are_frozen_dataclasses(tmp_path: Path) -> None:
    ledger = make(tmp_path)
    spend(ledger, 0.5)
    entries = ledger.entries
    assert isinstance(entries, tuple) and isinstance(entries[0], LedgerEntry)
    with pytest.raises(dataclasses.FrozenInstanceError):
        entries[0].epsilon = 0.0  # type: ignore[misc]


# -- refusal at the boundary ----------------------------------------------------


def test_exactly_the_total_is_allowed_and_a_tiny_bit_more_refused(tmp_path: Path) -> None:
    ledger = make(tmp_path, total=2.0)
    spend(ledger, 1.5)
    ledger.reserve(0.5, "last", "laplace")
    assert ledger.remaining == 0.0
    before = (tmp_path / "ledger.json").read_bytes()
    with pytest.raises(PrivacyError, match="requested epsilon 1e-09 but only 0 of 2 remains"):
        ledger.reserve(1e-9, "one more", "laplace")
    assert (tmp_path / "ledger.json").read_bytes() == before  # a refusal records nothing


@pytest.mark.parametrize(("excess", "allowed"), [(BUDGET_TOLERANCE / 2, True), (1e-9, False)])
def test_single_request_over_total(tmp_path: Path, excess: float, allowed: bool) -> None:
    ledger = make(tmp_path, total=1.0)
    if allowed:
        ledger.reserve(1.0 + excess, "at the boundary", "laplace")
        assert len(ledger.entries) == 1
    else:
        with pytest.raises(PrivacyError):
            ledger.reserve(1.0 + excess, "at the boundary", "laplace")
        assert ledger.entries == ()


def test_float_rounding_does_not_refuse_parts_that_sum_to_the_total(tmp_path: Path) -> None:
    assert 0.1 + 0.2 > 0.3  # the rounding the tolerance absorbs
    ledger = make(tmp_path, total=0.3)
    spend(ledger, 0.1)
    spend(ledger, 0.2)
    assert ledger.remaining == 0.0


def test_refusal_message_names_entity_request_remaining_total_and_count(tmp_path: Path) -> None:
    ledger = make(tmp_path, total=2.0)
    spend(ledger, 0.5)
    spend(ledger, 0.5)
    ledger.reserve(0.5, "in flight", "laplace")
    with pytest.raises(PrivacyError) as refused:
        ledger.reserve(1, "too much", "laplace")
    assert str(refused.value) == (
        "entity h1: privacy budget exhausted: requested epsilon 1 but only 0.5 of 2 remains "
        "(1.5 spent or reserved in 3 releases)"
    )


def test_zero_total_refuses_everything(tmp_path: Path) -> None:
    with pytest.raises(PrivacyError, match=r"only 0 of 0 remains \(0 spent or reserved in 0 releases\)"):
        make(tmp_path, total=0.0).reserve(1e-6, "any", "laplace")


@pytest.mark.parametrize("epsilon", [0, 0.0, -0.5, math.nan, math.inf, -math.inf])
def test_epsilon_must_be_finite_and_positive(tmp_path: Path, epsilon: float) -> None:
    ledger = make(tmp_path)
    with pytest.raises(ValueError, match="epsilon must be finite and > 0"):
        ledger.reserve(epsilon, "weights", "laplace")
    assert not (tmp_path / "ledger.json").exists()


@pytest.mark.parametrize("epsilon", [True, "0.5", None])
def test_epsilon_must_be_a_number(tmp_path: Path, epsilon: object) -> None:
    with pytest.raises(TypeError, match="epsilon must be a real number"):
        make(tmp_path).reserve(epsilon, "weights", "laplace")  # type: ignore[arg-type]


@pytest.mark.parametrize(("purpose", "mechanism"), [("", "laplace"), ("weights", "  ")])
def test_purpose_and_mechanism_required(tmp_path: Path, purpose: str, mechanism: str) -> None:
    with pytest.raises(ValueError, match="must be a non-empty string"):
        make(tmp_path).reserve(0.5, purpose, mechanism)


# -- two-phase spending --------------------------------------------------------


def test_commit_marks_spent(tmp_path: Path) -> None:
    ledger = make(tmp_path)
    reservation = ledger.reserve(0.75, "weights", "laplace")
    assert (ledger.spent, ledger.reserved, ledger.remaining) == (0.0, 0.75, 1.25)
    reservation.commit()
    assert (ledger.spent, ledger.reserved, ledger.remaining) == (0.75, 0.0, 1.25)
    [entry] = ledger.entries
    assert entry.state == "spent"
    assert datetime.fromisoformat(entry.spent_time).utcoffset() == timedelta(0)


def test_cancel_frees_the_budget(tmp_path: Path) -> None:
    ledger = make(tmp_path, total=1.0)
    reservation = ledger.reserve(1.0, "weights", "laplace")
    with pytest.raises(PrivacyError):
        ledger.reserve(0.1, "meanwhile", "laplace")
    reservation.cancel()
    reservation.cancel()  # idempotent
    assert ledger.entries == () and ledger.remaining == 1.0
    ledger.reserve(1.0, "retry", "laplace").commit()
    assert ledger.spent == 1.0


def test_spent_budget_is_never_returned(tmp_path: Path) -> None:
    ledger = make(tmp_path)
    reservation = ledger.reserve(0.5, "weights", "laplace")
    reservation.commit()
    with pytest.raises(PrivacyError, match="already spent and cannot be cancelled"):
        reservation.cancel()
    with pytest.raises(PrivacyError, match="already spent; reserve again"):
        reservation.commit()  # a second release under one reservation would under-count
    assert ledger.spent == 0.5 and len(ledger.entries) == 1


def test_commit_after_cancel_refused(tmp_path: Path) -> None:
    ledger = make(tmp_path)
    reservation = ledger.reserve(0.5, "weights", "laplace")
    reservation.cancel()
    with pytest.raises(PrivacyError, match="is not in ledger .* must not be sent"):
        reservation.commit()
    assert ledger.entries == ()


def test_context_manager_commits_on_normal_exit(tmp_path: Path) -> None:
    ledger = make(tmp_path)
    with ledger.reserve(0.5, "weights", "laplace") as reservation:
        assert ledger.reserved == 0.5
    assert [(e.id, e.state) for e in ledger.entries] == [(reservation.id, "spent")]


def test_exception_inside_context_manager_cancels(tmp_path: Path) -> None:
    ledger = make(tmp_path, total=1.0)
    with pytest.raises(ZeroDivisionError):
        with ledger.reserve(1.0, "weights", "laplace"):
            1 / 0
    assert ledger.entries == () and ledger.remaining == 1.0


def test_exception_after_explicit_commit_keeps_it_spent(tmp_path: Path) -> None:
    ledger = make(tmp_path)
    with pytest.raises(ConnectionError):
        with ledger.reserve(0.5, "weights", "laplace") as reservation:
            reservation.commit()
            raise ConnectionError("dropped after the release was sent")
    assert ledger.spent == 0.5


def test_explicit_cancel_inside_context_manager_is_not_committed(tmp_path: Path) -> None:
    ledger = make(tmp_path)
    with ledger.reserve(0.5, "weights", "laplace") as reservation:
        reservation.cancel()
    assert ledger.entries == ()


def _reserve_then_die(directory: Path) -> None:
    make(directory).reserve(0.5, "crashed training", "laplace")
    os._exit(3)  # no cleanup, no commit, no cancel: like a kill -9 after reserve


def test_crashed_reservation_stays_counted(tmp_path: Path) -> None:
    child = FORK.Process(target=_reserve_then_die, args=(tmp_path,))
    child.start()
    child.join(timeout=10)
    assert child.exitcode == 3

    restarted = make(tmp_path)
    [entry] = restarted.entries
    assert (entry.state, entry.purpose) == ("reserved", "crashed training")
    assert (restarted.spent, restarted.reserved, restarted.remaining) == (0.0, 0.5, 1.5)
    with pytest.raises(PrivacyError, match="only 1.5 of 2 remains"):
        restarted.reserve(1.6, "next", "laplace")
    report = restarted.report()
    assert "reserved  laplace" in report and "stopped before committing" in report


# -- persistence ---------------------------------------------------------------


def test_new_instance_sees_earlier_entries(tmp_path: Path) -> None:
    first = make(tmp_path, total=2.0)
    spend(first, 1.25, "task t1")
    first.reserve(0.5, "task t2", "laplace")

    restarted = make(tmp_path, total=2.0)
    assert restarted.entries == first.entries
    assert (restarted.spent, restarted.reserved, restarted.remaining) == (1.25, 0.5, 0.25)
    with pytest.raises(PrivacyError):
        restarted.reserve(0.5, "task t3", "laplace")
    spend(restarted, 0.25, "task t3")
    assert first.remaining == 0.0  # the first instance re-reads the file, no stale copy


def test_entity_id_mismatch_refused(tmp_path: Path) -> None:
    spend(make(tmp_path, entity_id="h2"), 0.5)
    with pytest.raises(ConfigError, match="belongs to entity 'h2', but this entity is 'h1'"):
        make(tmp_path, entity_id="h1")


def test_lowered_total_below_spent_refuses_every_request(tmp_path: Path) -> None:
    spend(make(tmp_path, total=2.0), 1.5)
    lowered = make(tmp_path, total=1.0)
    assert (lowered.spent, lowered.remaining) == (1.5, 0.0)
    with pytest.raises(PrivacyError, match=r"requested epsilon 1e-06 but only 0 of 1 remains \(1.5 spent"):
        lowered.reserve(1e-6, "tiny", "laplace")
    assert "over budget by 0.5" in lowered.report()


def test_raised_total_is_honoured_and_recorded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    spend(make(tmp_path, total=2.0), 1.5)
    with caplog.at_level(logging.WARNING, logger="entity.ledger"):
        raised = make(tmp_path, total=3.0)
    assert "total_epsilon changed from 2" in caplog.text and "the 1.5 already recorded still counts" in caplog.text
    spend(raised, 1.5)
    assert raised.remaining == 0.0
    assert json.loads((tmp_path / "ledger.json").read_text())["total_epsilon"] == 3.0


def _valid_document() -> dict:
    return {
        "format": "ppsvm-privacy-ledger",
        "version": 1,
        "entity_id": "h1",
        "total_epsilon": 2.0,
        "entries": [
            {
                "id": str(uuid.uuid4()),
                "epsilon": 0.5,
                "purpose": "weights",
                "mechanism": "laplace",
                "state": "spent",
                "time": "2024-01-01T00:00:00+00:00",
                "spent_time": "2024-01-01T00:00:01+00:00",
            }
        ],
    }


def _corrupt(change: str) -> str:
    document = _valid_document()
    entry = document["entries"][0]
    if change == "negative epsilon":
        entry["epsilon"] = -0.5
    elif change == "nan epsilon":
        return json.dumps(document).replace("0.5", "NaN")
    elif change == "unknown state":
        entry["state"] = "refunded"
    elif change == "spent without spent_time":
        entry["spent_time"] = None
    elif change == "missing key":
        del entry["purpose"]
    elif change == "duplicate id":
        document["entries"].append(dict(entry))
    elif change == "entries not a list":
        document["entries"] = {}
    elif change == "other format":
        document["format"] = "something-else"
    return json.dumps(document)


@pytest.mark.parametrize(
    "content",
    [
        "",
        '{"format": "ppsvm-privacy-ledger", "version": 1, "entr',  # a truncated file
        "[]",
        *(
            _corrupt(change)
            for change in [
                "negative epsilon",
                "nan epsilon",
                "unknown state",
                "spent without spent_time",
                "missing key",
                "duplicate id",
                "entries not a list",
                "other format",
            ]
        ),
    ],
)
def test_corrupt_file_refused_and_left_untouched(tmp_path: Path, content: str) -> None:
    path = tmp_path / "ledger.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as refused:
        make(tmp_path)
    message = str(refused.value)
    assert str(path) in message and f"python -m json.tool {path}" in message and "reset" in message
    assert path.read_text() == content


def test_valid_document_fixture_is_accepted(tmp_path: Path) -> None:
    # The corruptions above are one change away from this; it must load, or they prove nothing.
    (tmp_path / "ledger.json").write_text(json.dumps(_valid_document()))
    assert make(tmp_path).spent == 0.5


def test_corruption_after_start_is_refused_not_overwritten(tmp_path: Path) -> None:
    ledger = make(tmp_path)
    spend(ledger, 0.5)
    (tmp_path / "ledger.json").write_text("{garbage")
    with pytest.raises(ConfigError, match="is not valid JSON"):
        ledger.reserve(0.5, "weights", "laplace")
    assert (tmp_path / "ledger.json").read_text() == "{garbage"


def test_newer_version_refused(tmp_path: Path) -> None:
    document = _valid_document()
    document["version"] = 2
    (tmp_path / "ledger.json").write_text(json.dumps(document))
    with pytest.raises(ConfigError, match="has version 2; this ppsvm reads version 1"):
        make(tmp_path)


# -- atomic writes -------------------------------------------------------------


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_failed_write_leaves_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    ledger = make(tmp_path)
    spend(ledger, 0.5)
    before = (tmp_path / "ledger.json").read_bytes()

    def crash(*args: object) -> None:
        raise OSError("simulated crash mid-write")

    monkeypatch.setattr(os, failing, crash)
    with pytest.raises(OSError, match="simulated crash"):
        ledger.reserve(0.5, "weights", "laplace")
    monkeypatch.undo()

    assert (tmp_path / "ledger.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ledger.json", "ledger.json.lock"]
    assert make(tmp_path).spent == 0.5


def test_failed_commit_write_leaves_it_reserved_and_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = make(tmp_path)
    reservation = ledger.reserve(0.5, "weights", "laplace")

    def crash(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        reservation.commit()
    monkeypatch.undo()
    assert (ledger.reserved, ledger.remaining) == (0.5, 1.5)


def test_write_syncs_file_and_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_fsync = os.fsync
    synced: list[str] = []

    def recording_fsync(fd: int) -> None:
        synced.append("directory" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    make(tmp_path).reserve(0.5, "weights", "laplace")
    assert synced == ["file", "directory"]


# -- concurrency ---------------------------------------------------------------

TOTAL, EPSILON, WORKERS = 1.0, 0.3, 8  # floor(1.0 / 0.3) = 3 succeed, 5 are refused


def _contend(directory: Path, start: threading.Barrier, results: object) -> None:
    ledger = make(directory, total=TOTAL)  # its own instance, as a separate server would have
    start.wait(timeout=10)
    try:
        ledger.reserve(EPSILON, "concurrent weights", "laplace").commit()
        results.put("ok")  # type: ignore[attr-defined]
    except PrivacyError:
        results.put("refused")  # type: ignore[attr-defined]


def _assert_consistent(directory: Path, outcomes: list[str]) -> None:
    assert sorted(outcomes) == ["ok"] * 3 + ["refused"] * 5
    entries = make(directory, total=TOTAL).entries
    assert len(entries) == 3 and len({e.id for e in entries}) == 3
    assert all(e.state == "spent" and e.epsilon == EPSILON for e in entries)
    assert not list(directory.glob("*.tmp"))


def test_threads_never_overspend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    widen_race(monkeypatch)
    shared = make(tmp_path, total=TOTAL)
    start = threading.Barrier(WORKERS)
    outcomes: list[str] = []

    def worker() -> None:
        start.wait(timeout=10)
        try:
            shared.reserve(EPSILON, "concurrent weights", "laplace").commit()
            outcomes.append("ok")
        except PrivacyError:
            outcomes.append("refused")

    threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    _assert_consistent(tmp_path, outcomes)


def test_processes_never_overspend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    widen_race(monkeypatch)  # inherited by the forked children
    start, results = FORK.Barrier(WORKERS), FORK.Queue()
    processes = [FORK.Process(target=_contend, args=(tmp_path, start, results)) for _ in range(WORKERS)]
    for process in processes:
        process.start()
    outcomes = [results.get(timeout=20) for _ in processes]
    for process in processes:
        process.join(timeout=10)
        assert process.exitcode == 0
    _assert_consistent(tmp_path, outcomes)


@settings(max_examples=20, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from([0.1, 0.25, 0.5, 1.0, 1.5]), st.sampled_from(["commit", "cancel", "keep"])),
        max_size=8,
    )
)
def test_matches_a_simple_budget_model(steps: list[tuple[float, str]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        ledger = make(Path(directory), total=2.0)
        model_spent = model_reserved = 0.0
        for epsilon, action in steps:
            if model_spent + model_reserved + epsilon > 2.0 + BUDGET_TOLERANCE:
                with pytest.raises(PrivacyError):
                    ledger.reserve(epsilon, "step", "laplace")
                continue
            reservation = ledger.reserve(epsilon, "step", "laplace")
            if action == "commit":
                reservation.commit()
                model_spent += epsilon
            elif action == "keep":
                model_reserved += epsilon
            else:
                reservation.cancel()
        assert ledger.spent == pytest.approx(model_spent, abs=1e-12)
        assert ledger.reserved == pytest.approx(model_reserved, abs=1e-12)
        assert ledger.remaining == pytest.approx(max(0.0, 2.0 - model_spent - model_reserved), abs=1e-12)


# -- report and summary --------------------------------------------------------


def test_report_lists_entries_and_totals(tmp_path: Path) -> None:
    ledger = make(tmp_path, total=2.0)
    assert ledger.report().splitlines()[1:] == [
        "no releases recorded",
        "spent 0, reserved 0, remaining 2 of total 2 (0 releases)",
    ]
    spend(ledger, 0.5, "hybrid SVM weights, task t1")
    ledger.reserve(0.25, "task t2", "gamma output perturbation")
    lines = ledger.report().splitlines()
    assert lines[0] == f"privacy ledger of entity h1 ({tmp_path / 'ledger.json'})"
    assert lines[1].split() == ["time", "(UTC)", "epsilon", "state", "mechanism", "purpose"]
    first, second = ledger.entries
    assert lines[2].split(maxsplit=4) == [first.time, "0.5", "spent", "laplace", "hybrid SVM weights, task t1"]
    assert lines[3].startswith(second.time) and lines[3].endswith("gamma output perturbation  task t2")
    # Columns line up: epsilon right-aligned under its header, state left-aligned.
    epsilon_end, state_start = lines[1].index("epsilon") + len("epsilon"), lines[1].index("state")
    assert lines[2][:epsilon_end].endswith(" 0.5") and lines[3][:epsilon_end].endswith(" 0.25")
    assert lines[2][state_start:].startswith("spent ") and lines[3][state_start:].startswith("reserved ")
    assert lines[4] == "spent 0.5, reserved 0.25, remaining 1.25 of total 2 (2 releases)"
    assert "over budget" not in ledger.report()


def test_summary_is_json_ready(tmp_path: Path) -> None:
    ledger = make(tmp_path, total=2.0)
    spend(ledger, 0.5, "task t1")
    reservation = ledger.reserve(0.25, "task t2", "laplace")
    summary = json.loads(json.dumps(ledger.summary()))
    assert {k: v for k, v in summary.items() if k != "entries"} == {
        "entity_id": "h1",
        "ledger": str(tmp_path / "ledger.json"),
        "total_epsilon": 2.0,
        "spent": 0.5,
        "reserved": 0.25,
        "remaining": 1.25,
    }
    assert [(e["purpose"], e["state"]) for e in summary["entries"]] == [("task t1", "spent"), ("task t2", "reserved")]
    assert summary["entries"][1]["id"] == reservation.id
    assert set(summary["entries"][0]) == {f.name for f in dataclasses.fields(LedgerEntry)}
