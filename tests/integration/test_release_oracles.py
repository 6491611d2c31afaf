"""Issue 27's oracles against real `ppsvm entity` processes: no release fails, or answers differently, on one record.

A release that fails after reading the records answers one exact bit about them, which no epsilon can price: a
threshold model whose scaling overflowed exactly on records above t gave any feature's maximum by bisection. Two
neighbouring entities (the same WDBC cell, one training and one held-out record replaced) are started from their own
split directories with the coordinator's valid certificate, and every hostile request goes to both:

- the overflow probe through DpEvaluate and DpScoreHistogram, at thresholds around the changed record: always
  answered, so bisection finds nothing; the control bisects the bit the old entities answered (computed by the harness
  on the entity's own records) and reads the maximum to 1e-6;
- every hostile DP model the bounds allow (:func:`ppsvm.experiments.coordinator_attacks.hostile_dp_models`), to
  both DP RPCs on both neighbours: every call answered;
- a model beyond the bounds: refused before anything is charged;
- the random-kernel RPCs at their most hostile settings (Gaussian width at the largest double, every record set and
  ids, LocalBaseline at the corners of its allowed settings): every call answered.
"""

from __future__ import annotations

import csv
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
import pytest

from ppsvm.core.dp_model import MAX_THRESHOLD
from ppsvm.entity.cell import BASELINE_MU_RANGE, BASELINE_NU_RANGE
from ppsvm.entity.guard import MIN_EPSILON
from ppsvm.experiments.coordinator_attacks import bisect_change, hostile_dp_models, overflow_model, overflowed
from ppsvm.wire.chunks import decode_arrays
from ppsvm.wire.rpc import ppsvm_pb2 as pb

from .conftest import WDBC, WDBC_OPTIONS, split
from .test_malicious_coordinator import TIMEOUT, Entity, refused, signed_range, start_entity

N = 30  # WDBC features, one column block
FEATURE = 0  # the feature whose maximum the probe is after (WDBC x2, declared bounds 6..29)
EDGES = np.array([-1.0, 0.0, 1.0])


@dataclass
class Neighbours:
    """The same entity started twice: on its cell, and on the cell with one training and one held-out record
    replaced (the changed training record holds the new maximum of FEATURE)."""

    original: Entity
    changed: Entity
    new_maximum: float
    peer: Entity | None = None  # the other member of their column block, for its tagged range

    @property
    def both(self) -> tuple[Entity, Entity]:
        return self.original, self.changed

    def stop(self) -> None:
        for entity in (*self.both, *([self.peer] if self.peer else [])):
            entity.stop()


def neighbouring_splits(base: Path, privacy: str) -> tuple[Path, Path, float]:
    """`ppsvm split` WDBC 2 x 1 into ``base/original``; a copy in ``base/changed`` whose r0c0 has one training record
    raised to a new maximum of FEATURE (within the declared bounds) and one held-out record moved; both r0c0 configs
    get ``privacy``. Returns the two r0c0 configs and the new maximum."""
    original = split(base / "original", WDBC, 2, 1, *WDBC_OPTIONS)
    config = original / "r0c0.toml"
    config.write_text(config.read_text() + f"\n[privacy]\nconsent_single_block_release = true\n{privacy}\n")
    changed = base / "changed"
    shutil.copytree(original, changed)
    path = changed / "r0c0.csv"
    rows = list(csv.reader(path.open()))
    column = rows[0].index("x2")
    train = [r for r in rows[1:] if r[2] == "train"]
    old_maximum = max(float(r[column]) for r in train)
    new_maximum = (old_maximum + 29.0) / 2  # still within the declared high of 29: not clipped
    train[0][column] = repr(new_maximum)
    next(r for r in rows[1:] if r[2] == "test")[column] = repr(old_maximum)
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    return config, changed / "r0c0.toml", new_maximum


@pytest.fixture(scope="module")
def dp_neighbours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Neighbours]:
    first, second, maximum = neighbouring_splits(tmp_path_factory.mktemp("dp-neighbours"), "epsilon_total = 5")
    started = Neighbours(start_entity(first), start_entity(second), maximum)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def rk_neighbours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Neighbours]:
    first, second, maximum = neighbouring_splits(tmp_path_factory.mktemp("rk-neighbours"), "")
    started = Neighbours(start_entity(first), start_entity(second), maximum, start_entity(first.with_name("r1c0.toml")))
    try:
        yield started
    finally:
        started.stop()


def dp_calls(entity: Entity, model: bytes) -> dict[str, Callable[[], object]]:
    return {
        "DpEvaluate": lambda: entity.stub.DpEvaluate(
            pb.DpEvaluateRequest(model_json=model, epsilon=MIN_EPSILON), timeout=TIMEOUT
        ),
        "DpScoreHistogram": lambda: entity.stub.DpScoreHistogram(
            pb.DpHistogramRequest(model_json=model, edges=EDGES.tolist(), epsilon=MIN_EPSILON), timeout=TIMEOUT
        ),
    }


def answered(call: Callable[[], object]) -> bool:
    """Whether the entity answered (True) or failed (False): the bit the threshold oracle reads."""
    try:
        call()
    except grpc.RpcError:
        return False
    return True


def test_the_overflow_probe_reads_no_maximum_through_either_dp_evaluation(dp_neighbours: Neighbours) -> None:
    entity = dp_neighbours.changed
    X = entity.cell().X_train
    maximum = float(X[:, FEATURE].max())
    assert maximum == pytest.approx(dp_neighbours.new_maximum)
    # Control: the bit the old entities answered, bisected between the declared bounds, reads the maximum.
    found = bisect_change(lambda t: overflowed(X, overflow_model(FEATURE, t, N)), 6.0, 29.0, steps=60)
    assert found == pytest.approx(maximum, rel=1e-6)
    # The live entity answers at every threshold, on both RPCs: the bisection has nothing to start from.
    thresholds = [6.0, 29.0, maximum * (1 - 1e-3), maximum * (1 + 1e-3), *np.linspace(10.0, 28.0, 5)]
    for rpc in ("DpEvaluate", "DpScoreHistogram"):
        bits = [answered(dp_calls(entity, overflow_model(FEATURE, t, N))[rpc]) for t in thresholds]
        assert all(bits), (rpc, bits)
        with pytest.raises(ValueError, match="answers the same at both ends"):
            bisect_change(lambda t, rpc=rpc: answered(dp_calls(entity, overflow_model(FEATURE, t, N))[rpc]), 6, 29, 1)


def test_every_hostile_model_within_the_bounds_is_answered_by_both_neighbours(dp_neighbours: Neighbours) -> None:
    failures = []
    for number, model in enumerate(hostile_dp_models(N)):
        text = model.to_json().encode()
        for entity in dp_neighbours.both:
            for rpc, call in dp_calls(entity, text).items():
                try:
                    reply = call()
                except grpc.RpcError as error:
                    failures.append((number, entity.config.parent.name, rpc, error.code(), error.details()))
                    continue
                if rpc == "DpScoreHistogram":
                    assert len(reply.negative_counts) == len(reply.positive_counts) == EDGES.size + 1
                else:
                    assert 0.0 <= reply.error_rate <= 1.0
    assert not failures, failures


def test_a_model_beyond_the_bounds_is_refused_before_anything_is_charged(dp_neighbours: Neighbours) -> None:
    entity = dp_neighbours.original
    model = overflow_model(FEATURE, 10.0, N).decode().replace('"threshold": 0.0', f'"threshold": {4 * MAX_THRESHOLD!r}')
    before = entity.metadata()
    for rpc, call in dp_calls(entity, model.encode()).items():
        error = refused(call)
        assert error.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION), rpc
        assert "the model must have |threshold|" in error.details(), error.details()
    after = entity.metadata()
    assert (after.releases, after.epsilon_spent) == (before.releases, before.epsilon_spent)


def test_the_random_kernel_rpcs_answer_their_most_hostile_requests_on_both_neighbours(
    rk_neighbours: Neighbours,
) -> None:
    """The widest Gaussian width there is (every kernel value underflows to 0, the measured single-block risk runs on
    it), every record set and a record named by id, and LocalBaseline at the corners of its allowed settings."""
    assert rk_neighbours.peer is not None
    for entity in rk_neighbours.both:
        ranges = [signed_range(entity), signed_range(rk_neighbours.peer)]
        records = decode_arrays(entity.stub.Records(pb.Empty(), timeout=TIMEOUT))
        requests = [
            pb.KernelRequest(kernel=pb.GAUSSIAN, mbar=N - 1, mu=float(np.finfo(np.float64).max), record_set=kind)
            for kind in (pb.TRAIN, pb.TEST)
        ]
        requests.append(
            pb.KernelRequest(
                kernel=pb.GAUSSIAN,
                mbar=N - 1,
                mu=float(np.finfo(np.float64).max),
                ids=pb.RecordIds(ids=[str(records["test_ids"][0])]),
            )
        )
        for request in requests:
            request.scaling.CopyFrom(pb.Scaling(ranges=ranges))
            block = decode_arrays(entity.stub.KernelBlock(request, timeout=TIMEOUT))["kernel"]
            assert block.shape[1] == N - 1 and np.isfinite(block).all()
        for nu in BASELINE_NU_RANGE:
            for mu in BASELINE_MU_RANGE:
                request = pb.BaselineRequest(task="classify", kernel=pb.GAUSSIAN, nu=nu, mu=mu, seed=0)
                reply = entity.stub.LocalBaseline(request, timeout=TIMEOUT)
                assert 0.0 <= reply.error_rate <= 1.0
