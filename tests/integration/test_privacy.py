"""Privacy rules on the wire (docs/design.md section 2): a spy records every message entities send.

No row of A_ij (raw or scaled) and no entry of B_j may appear in what leaves an
entity; the mbar guard refuses mbar >= n_j unless the entity's own config
overrides it, and then every output says the run was not private.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from ppsvm.config import federation_at_addresses, load_entity_config, load_federation
from ppsvm.coordinator.dp_train import DpOptions, train_dp, write_public_source
from ppsvm.coordinator.evaluate import entity_alone, evaluate_dp_model, evaluate_model
from ppsvm.coordinator.train import TrainOptions, train_and_save
from ppsvm.core.fourier import apply_scaling, fourier_features
from ppsvm.core.kernels import gaussian_fetch_width, gaussian_kernel
from ppsvm.core.model import Model
from ppsvm.core.randomness import derive_B
from ppsvm.entity.cell import EntityCore
from ppsvm.entity.servicer import EntityServicer
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc
from ppsvm.wire.server import create_server

from .conftest import DP_SPLIT_OPTIONS, WDBC, WDBC_OPTIONS, coordinator_channel, public_and_private, split

MBAR = 6


class Spy:
    """Stands in for a servicer: forwards every call and keeps the serialized replies."""

    def __init__(self, servicer: EntityServicer) -> None:
        self._servicer = servicer
        self.replies: list[Any] = []

    @property
    def sent(self) -> list[bytes]:
        """Every reply as it went on the wire (a kernel block's messages are serialised by the servicer itself)."""
        return [reply if isinstance(reply, bytes) else reply.SerializeToString() for reply in self.replies]

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._servicer, name)

        def unary(request: Any, context: grpc.ServicerContext) -> Any:
            reply = method(request, context)
            self.replies.append(reply)
            return reply

        def stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            for reply in method(request, context):
                self.replies.append(reply)
                yield reply

        return stream if name in ("Records", "FeatureRange", "KernelBlock") else unary


@contextlib.contextmanager
def serve_spied(split_dir: Path) -> Iterator[tuple[Path, dict[str, Spy], dict[str, EntityCore]]]:
    """Every cell of a split served in this process behind a Spy, with TLS; the live federation file."""
    planned = load_federation(split_dir / "federation.toml")
    servers, spies, cores, addresses = [], {}, {}, []
    try:
        for entity in planned.entities:
            config = load_entity_config(split_dir / f"{entity.id}.toml")
            core = EntityCore(config)
            spy = Spy(EntityServicer(core, split_dir))
            server, port = create_server(
                "127.0.0.1:0",
                lambda s, spy=spy: pb_grpc.add_EntityServicer_to_server(spy, s),
                tls=config.tls,
                allowed_peers={config.coordinator_identity},
            )
            servers.append(server)
            spies[entity.id], cores[entity.id] = spy, core
            addresses.append(f"127.0.0.1:{port}")
        live = split_dir / "federation.live.toml"
        live.write_text(federation_at_addresses(planned, addresses))
        yield live, spies, cores
    finally:
        for server in servers:
            server.stop(0)


@pytest.fixture
def spied(tmp_path: Path) -> Iterator[tuple[Path, Path, dict[str, Spy], dict[str, EntityCore]]]:
    split_dir = split(tmp_path / "split", WDBC, 2, 2, *WDBC_OPTIONS)
    with serve_spied(split_dir) as (live, spies, cores):
        yield split_dir, live, spies, cores


def _float_bytes(values: np.ndarray) -> set[bytes]:
    return {np.float64(v).tobytes() for v in np.ravel(values)}


def test_no_data_row_and_no_B_entry_leaves_an_entity(spied) -> None:
    split_dir, live, spies, cores = spied
    federation = load_federation(live)
    model = train_and_save(
        federation, TrainOptions(kernel="gaussian", mbar=MBAR, nu=10.0, mu=0.05), split_dir / "model.json"
    )
    evaluate_model(federation, model)
    entity_alone(federation, "classify", "gaussian", nu=1.0, mu=0.05, seed=0)

    for entity_id, core in cores.items():
        wire = b"".join(spies[entity_id].sent)
        cell = core.cell
        # The spy sees what is sent: the kernel block it published is in the log.
        scaling = model.scaling[core.config.column_block]
        B = derive_B(core.config.read_secret(), MBAR, cell.n_features)
        X = np.vstack([cell.X_train, cell.X_test])
        scaled = (X - np.array(scaling.low)) / np.where(
            np.array(scaling.high) > np.array(scaling.low), np.array(scaling.high) - np.array(scaling.low), 1.0
        )
        # Entities publish Gaussian blocks at the one width the coordinator fetches (1/n), not the model's.
        fetched_at = gaussian_fetch_width(sum(len(block.low) for block in model.scaling))
        alone = gaussian_kernel(scaled[:1], B, fetched_at)
        # A 2 x 2 checkerboard combines each row block's blocks by secure aggregation (privacy rule 8): the entity's
        # block on its own never leaves, only its masked share does; positive control: the spy saw the shares.
        assert alone.tobytes() not in wire and np.log(alone).tobytes() not in wire, f"{entity_id} sent its block"
        assert len(wire) >= len(X) * MBAR * 8, "positive control: the spy must see the masked kernel shares"
        for row in (*X, *scaled):
            assert row.tobytes() not in wire, f"entity {entity_id} sent a row of its cell"
        for value in _float_bytes(B):
            assert value not in wire, f"entity {entity_id} sent an entry of its B_j"
        # With bounds declared (as `ppsvm split` writes them) those are what FeatureRange publishes: round numbers
        # that a record may happen to hold too.
        declared = () if core.bounds is None else (*core.bounds[0], *core.bounds[1])
        # The entity-alone figures are rounded to 3 decimals, as a record's values may be (WDBC's 0.093).
        figures = [
            value
            for reply in spies[entity_id].replies
            if isinstance(reply, pb.BaselineReply)
            for value in (reply.error_rate, reply.auc, reply.relative_error, reply.rmse)
        ]
        _assert_no_feature_value_but_min_max(entity_id, wire, X, cell.X_train, published=(*declared, *figures))


def _assert_no_feature_value_but_min_max(
    entity_id: str,
    wire: bytes,
    X: np.ndarray,
    X_train: np.ndarray,
    published: tuple[float, ...] = (),
) -> None:
    """Single values of A may appear only as the allowed per-feature min and max, or where they coincide with a
    label or another number the protocol publishes (``published``, e.g. epsilon and the remaining budget)."""
    allowed = (
        _float_bytes(X_train.min(axis=0))
        | _float_bytes(X_train.max(axis=0))
        | _float_bytes(np.array([1.0, -1.0, *published]))
    )
    leaked = [v for v in _float_bytes(X) - allowed if v in wire]
    assert not leaked, f"entity {entity_id} sent feature values other than its min/max: {leaked[:3]}"


def test_dp_mode_sends_only_noised_weights_and_figures(tmp_path: Path) -> None:
    """DpWeights, DpScoreHistogram and DpEvaluate: no row (raw, scaled or mapped by zhat) and no feature value
    leaves; the weights and the noised counts do."""
    public, private = public_and_private(tmp_path, 60)
    split_dir = split(tmp_path / "split", private, 2, 1, *DP_SPLIT_OPTIONS)
    for config in split_dir.glob("r*c0.toml"):
        config.write_text(config.read_text() + "\n[privacy]\nepsilon_total = 3\n")
    with serve_spied(split_dir) as (live, spies, cores):
        federation = load_federation(live)
        write_public_source(split_dir / "r0c0.toml", public, tmp_path / "public.toml")
        # Released whatever it is worth: the wire is the subject here.
        options = DpOptions(
            method="dp-hybrid", public=tmp_path / "public.toml", epsilon=1.0, n_frequencies=20, allow_noisy=True
        )
        model = train_dp(federation, options)
        evaluate_dp_model(federation, model, 1.0)
    for entity_id, core in cores.items():
        wire = b"".join(spies[entity_id].sent)
        X = np.vstack([core.cell.X_train, core.cell.X_test])
        scaled = apply_scaling(X, np.array(model.low), np.array(model.high))
        mapped = fourier_features(scaled, np.array(model.rho))
        release = next(reply for reply in spies[entity_id].replies if isinstance(reply, pb.DpReply))
        histogram = next(reply for reply in spies[entity_id].replies if isinstance(reply, pb.DpHistogramReply))
        assert np.array(release.weights).tobytes() in wire, "positive control: the spy must see the released weights"
        for row in (*X, *scaled, *mapped):
            assert row.tobytes() not in wire, f"entity {entity_id} sent a row of its cell"
        # Numbers the protocol publishes: the epsilons (0.1 for the histogram), the budgets left and the noised error
        # rates (a whole noised count over n_test: 0.25 once matched a feature value's bytes by chance).
        evaluations = [reply for reply in spies[entity_id].replies if isinstance(reply, pb.DpEvaluateReply)]
        assert evaluations, "positive control: the spy must see the evaluation's replies"
        published = (release.epsilon, release.budget_remaining, histogram.epsilon, histogram.budget_remaining) + tuple(
            number for reply in evaluations for number in (reply.error_rate, reply.epsilon, reply.budget_remaining)
        )
        _assert_no_feature_value_but_min_max(entity_id, wire, X, core.cell.X_train, published)


def test_entity_refuses_mbar_not_below_its_width(spied) -> None:
    _, live, _, cores = spied
    entity = load_federation(live).entities[0]
    width = cores[entity.id].cell.n_features
    with coordinator_channel(live, entity) as channel:
        stub = pb_grpc.EntityStub(channel)
        # Rule 3 is checked before anything else, so the request needs no ranges to be refused.
        request = pb.KernelRequest(kernel=pb.GAUSSIAN, mbar=width, mu=1.0, record_set=pb.TRAIN)
        with pytest.raises(grpc.RpcError) as refused:
            list(stub.KernelBlock(request))
        assert refused.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert "privacy rule 3" in refused.value.details() and f"n_j = {width}" in refused.value.details()
        # The server keeps serving after a refusal.
        assert stub.Metadata(pb.Empty()).entity_id == entity.id


def test_coordinator_refuses_before_any_kernel_is_computed(federation) -> None:
    run = federation(1, 2)
    result = run.train("--mbar", "15", "--nu", "1", "--mu", "0.03", check=False)
    assert result.returncode == 1
    assert "privacy rule 3" in result.stderr and "r0c0" in result.stderr
    assert not (run.split_dir / "model.json").exists()


def test_override_runs_and_every_output_says_not_private(federation) -> None:
    run = federation(1, 2, extra_config="\n[privacy]\nnon_private_allow_mbar_at_least_features = true\n")
    trained = run.train("--mbar", "20", "--nu", "1", "--mu", "0.03")
    assert "NOT PRIVATE" in trained.stderr
    assert Model.load(run.split_dir / "model.json").private is False
    assert run.evaluate()["private"] is False
