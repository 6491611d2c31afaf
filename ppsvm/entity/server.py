"""Run an entity: load its cell, serve it over gRPC until SIGINT or SIGTERM."""

from __future__ import annotations

import dataclasses
import logging
import sys

import grpc

from ppsvm.config import SINGLE_BLOCK_CONSENT_KEY, SINGLE_BLOCK_GAIN_KEY, EntityConfig
from ppsvm.core.privacy import MIXED_MODE_WARNING, NOT_PRIVATE_BANNER
from ppsvm.entity.cell import EntityCore
from ppsvm.entity.metrics import EntityCollector
from ppsvm.entity.servicer import EntityServicer
from ppsvm.logs import set_process_fields
from ppsvm.wire.health import ENTITY_SERVICE
from ppsvm.wire.metrics import RpcMetrics, serve_metrics
from ppsvm.wire.rpc import ppsvm_pb2_grpc as pb_grpc
from ppsvm.wire.server import create_server, serve_until, stop_on_signals
from ppsvm.wire.tls import choose_tls

logger = logging.getLogger(__name__)


def start_entity(
    config: EntityConfig, *, insecure: bool = False, new_release_log: bool = False, metrics: RpcMetrics | None = None
) -> tuple[grpc.Server, int]:
    """Load the cell and its release log, derive nothing yet (B_j is derived per request), start serving.

    With TLS (the default) only the coordinator identity named in the config may call;
    ``insecure`` serves plaintext to anyone and is logged as a warning. ``new_release_log``
    starts the release log of an entity that has never served (a missing log is refused otherwise).
    ``metrics``: count the calls there, and add the entity's releases and budget (:mod:`ppsvm.entity.metrics`).

    Returns
    -------
    (server, port)
        The running server and the port it bound.
    """
    core = EntityCore(config, new_release_log=new_release_log)
    servicer = EntityServicer(core, model_dir=config.source.parent)
    tls = choose_tls(config.tls, insecure=insecure, source=config.source)
    server, port = create_server(
        config.listen,
        lambda s: pb_grpc.add_EntityServicer_to_server(servicer, s),
        tls=tls,
        allowed_peers={config.coordinator_identity},
        services=(ENTITY_SERVICE,),
        # An entity that cannot record a release can release nothing: it says so rather than refuse every call
        # (its log gone or read-only, its disk below the floor, or an append failed until the file is writable).
        readiness=core.guard.log.unwritable,
        metrics=metrics,
    )
    if metrics is not None:
        metrics.registry.register(EntityCollector(config.id, config.column_block, core.guard))
    cell = core.cell
    logger.info(
        "entity %s: column block %d, %d features, %d training and %d held-out records%s; serves the %s protocol",
        config.id,
        config.column_block,
        cell.n_features,
        len(cell.train_ids),
        len(cell.test_ids),
        ", labels held" if cell.y_train is not None else "",
        config.mode,
    )
    if core.blocks_leave_alone:
        logger.warning(
            "entity %s: no row-block peer to combine its kernel blocks with, so they would reach the coordinator on "
            "their own, and its column-block peers know B_j (privacy rule 8). Measured at its largest private mbar: "
            "%s. %s",
            config.id,
            core.single_block_exposure.describe(),
            f"It releases them by its own consent ([privacy] {SINGLE_BLOCK_CONSENT_KEY} = true)"
            if config.single_block_consent
            else f"It releases them: the gain is within its limit {config.single_block_max_gain:g}"
            if core.single_block_allowed
            else f"It refuses them: the gain is above its limit {config.single_block_max_gain:g} ([privacy] "
            f"{SINGLE_BLOCK_GAIN_KEY})",
        )
    return server, port


def serve_entity(
    config: EntityConfig,
    listen: str | None = None,
    *,
    insecure: bool = False,
    new_release_log: bool = False,
    metrics_at: tuple[str, int] | None = None,
) -> int:
    """Serve until SIGINT/SIGTERM; prints ``listening on HOST:PORT`` once calls are accepted.

    ``metrics_at``: (host, port) of the Prometheus endpoint to serve as well (:mod:`ppsvm.wire.metrics`).
    """
    if listen is not None:
        config = dataclasses.replace(config, listen=listen)
    set_process_fields(entity=config.id)
    metrics, endpoint = None, None
    if metrics_at is not None:
        metrics = RpcMetrics()
        endpoint = serve_metrics(metrics.registry, *metrics_at)  # a taken port fails before anything is served
        logger.info("entity %s: metrics on %s", config.id, endpoint.url)
    try:
        server, port = start_entity(config, insecure=insecure, new_release_log=new_release_log, metrics=metrics)
        stop = stop_on_signals()
        if config.non_private_override:
            print(NOT_PRIVATE_BANNER, file=sys.stderr, flush=True)
        if config.mode == "mixed":
            print(f"entity {config.id} {MIXED_MODE_WARNING}", file=sys.stderr, flush=True)
        serve_until(stop, server, config.listen, port, f"entity {config.id}")
    finally:
        if endpoint is not None:
            endpoint.close()
    return 0
