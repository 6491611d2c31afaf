"""A caller that opens kernel-block streams and never reads them, against a real `ppsvm entity` process.

Before: eight such streams (the server's worker threads) blocked the entity for everyone, for
ever. Now one caller holds at most ``PPSVM_MAX_CALLS_PER_PEER`` calls (more are refused with
RESOURCE_EXHAUSTED) and a stream whose message waits ``PPSVM_STREAM_WRITE_TIMEOUT_S`` for its
reader is cancelled, freeing its worker and its slot; both are set small here through the
entity's environment.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest

from ppsvm.config import federation_at_addresses, load_federation
from ppsvm.coordinator.client import EntityClient
from ppsvm.coordinator.federation import kernel_request
from ppsvm.data.partition import SplitOptions, split_dataset
from ppsvm.processes import EntityProcesses
from ppsvm.wire.chunks import decode_arrays
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc
from ppsvm.wire.tls import channel_credentials

from .conftest import coordinator_channel, rule_dataset

LIMIT = 3
STALLED = LIMIT + 2
ROWS, FEATURES, MBAR = 20_000, 12, 11  # a 1.7 MB kernel block: two stream messages
CALL_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def split_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(3)
    dataset = rule_dataset(rng.random((ROWS, FEATURES)))
    out = tmp_path_factory.mktemp("stalled") / "split"
    split_dataset(dataset, SplitOptions(rows=1, cols=1, out_dir=out, test_fraction=0.01, seed=0))
    return out


@contextlib.contextmanager
def running_entity(split_dir: Path, monkeypatch: pytest.MonkeyPatch, write_timeout_s: float) -> Iterator[Path]:
    """r0c0 as a `ppsvm entity` process with the limits in its environment; yields the live federation file."""
    monkeypatch.setenv("PPSVM_MAX_CALLS_PER_PEER", str(LIMIT))
    monkeypatch.setenv("PPSVM_STREAM_WRITE_TIMEOUT_S", str(write_timeout_s))
    with EntityProcesses([split_dir / "r0c0.toml"]) as processes:
        live = split_dir / f"live-{write_timeout_s:g}.toml"
        live.write_text(federation_at_addresses(load_federation(split_dir / "federation.toml"), processes.addresses))
        yield live


def kernel_block_request(federation_path: Path) -> pb.KernelRequest:
    """The train block request a coordinator sends (linear kernel, the entity's own signed range)."""
    federation = load_federation(federation_path)
    client = EntityClient(federation.entities[0], federation.tls, deadline=CALL_TIMEOUT_S)
    try:
        signed = client.feature_range()
    finally:
        client.close()
    return kernel_request("linear", MBAR, 0.0, [signed], record_set=pb.TRAIN)


def stall(federation_path: Path, request: pb.KernelRequest) -> tuple[grpc.Channel, list[grpc.Call]]:
    """STALLED KernelBlock streams on one connection, none of them ever read; returns once the entity has refused
    the ones over its limit, so the others hold their slots.

    The connection announces a 64 KiB receive window and never widens it (no BDP probing), as a caller that means
    to stall a server would: the entity's first 1 MiB message then never completes. (gRPC's defaults would let the
    client's transport absorb a few MB unread, and a stream that small would end instead of stalling.)
    """
    federation = load_federation(federation_path)
    entity = federation.entities[0]
    assert federation.tls is not None
    channel = grpc.secure_channel(
        entity.address,
        channel_credentials(federation.tls),
        options=[
            ("grpc.ssl_target_name_override", entity.id),
            ("grpc.http2.bdp_probe", 0),
            ("grpc.http2.lookahead_bytes", 1 << 16),
        ],
    )
    stub = pb_grpc.EntityStub(channel)
    calls = [stub.KernelBlock(request, timeout=600) for _ in range(STALLED)]
    deadline = time.monotonic() + CALL_TIMEOUT_S
    while sum(call.done() for call in calls) < STALLED - LIMIT:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the entity neither served nor refused the streams over its limit"
        time.sleep(0.05)
    return channel, calls


def seconds_until_served(
    federation_path: Path, request: pb.KernelRequest, rows: int, within: float
) -> tuple[float | None, set[str]]:
    """A fresh caller (new connection) asks for the whole block until it gets it: seconds taken (None: not within
    ``within``) and the refusals it met on the way."""
    entity = load_federation(federation_path).entities[0]
    began = time.monotonic()
    refusals: set[str] = set()
    with coordinator_channel(federation_path, entity) as channel:
        stub = pb_grpc.EntityStub(channel)
        while time.monotonic() - began < within:
            try:
                block = decode_arrays(stub.KernelBlock(request, timeout=CALL_TIMEOUT_S))["kernel"]
            except grpc.RpcError as error:
                assert error.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, (error.code(), error.details())
                refusals.add(error.details())
                time.sleep(0.1)
                continue
            assert block.shape == (rows, MBAR)
            return time.monotonic() - began, refusals
    return None, refusals


def train_rows(federation_path: Path) -> int:
    entity = load_federation(federation_path).entities[0]
    with coordinator_channel(federation_path, entity) as channel:
        return pb_grpc.EntityStub(channel).Metadata(pb.Empty(), timeout=CALL_TIMEOUT_S).n_train


def test_stalled_readers_cannot_lock_out_a_fresh_caller(split_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Five never-read KernelBlock streams against a limit of three: two are refused at once, the other three are cut
    off after the 2 s write timeout, and a fresh caller gets its whole block within a few seconds."""
    write_timeout_s = 2.0
    with running_entity(split_dir, monkeypatch, write_timeout_s) as live:
        request, rows = kernel_block_request(live), train_rows(live)
        started = time.monotonic()
        channel, stalled = stall(live, request)
        try:
            served_after, refusals = seconds_until_served(live, request, rows, within=write_timeout_s + 10.0)
            print(
                f"fresh caller served {served_after:.2f} s after {STALLED} stalled streams (limit {LIMIT}, write "
                f"timeout {write_timeout_s:g} s)"
            )
            assert served_after is not None and served_after < write_timeout_s + 5.0
            assert any(
                f"coordinator already has {LIMIT} calls running on this server" in r and "PPSVM_MAX_CALLS_PER_PEER" in r
                for r in refusals
            ), refusals
            codes = []
            for call in stalled:
                with pytest.raises(grpc.RpcError) as ended:
                    for _ in call:
                        pass
                codes.append(ended.value.code())
            assert sorted(codes, key=str) == sorted(
                [grpc.StatusCode.CANCELLED] * LIMIT + [grpc.StatusCode.RESOURCE_EXHAUSTED] * (STALLED - LIMIT), key=str
            )
            assert time.monotonic() - started < write_timeout_s + 10.0
        finally:
            channel.close()


def test_control_without_a_short_write_timeout_the_caller_stays_locked_out(
    split_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same stalls with an hour-long write timeout: the fresh caller is refused for as long as we wait, so the test
    above measures the timeout at work (and would fail against an entity that never cut a stalled reader off)."""
    with running_entity(split_dir, monkeypatch, 3600.0) as live:
        request, rows = kernel_block_request(live), train_rows(live)
        channel, _ = stall(live, request)
        try:
            served_after, refusals = seconds_until_served(live, request, rows, within=6.0)
            assert served_after is None and refusals
        finally:
            channel.close()
