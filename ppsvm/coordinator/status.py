"""``ppsvm coordinator status``: is every entity of a federation (and a prediction service) serving?

Asks each server's standard health check (:mod:`ppsvm.wire.health`) over the coordinator's own mutual TLS,
all at once, each with a short deadline and no retry: a snapshot, not a wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ppsvm.config import Federation
from ppsvm.constants import HEALTH_DEADLINE_S
from ppsvm.wire.health import ENTITY_SERVICE, PREDICTION_SERVICE, HealthAnswer, check_health
from ppsvm.wire.tls import choose_tls

PREDICTION = "prediction service"


@dataclass(frozen=True)
class ServerStatus:
    """One server's answer: who (an entity id, or ``prediction service``), where, and what it said."""

    name: str
    address: str
    answer: HealthAnswer

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "address": self.address,
            "status": self.answer.status,
            "reason": self.answer.reason,
            "ms": self.answer.ms,
        }


def federation_status(
    federation: Federation, *, deadline: float = HEALTH_DEADLINE_S, serve: str | None = None
) -> list[ServerStatus]:
    """The health of every entity, in federation order, then of the prediction service at ``serve`` if given.

    Entities are asked about ``ppsvm.v1.Entity``, the prediction service about ``ppsvm.v1.Coordinator``;
    the service at ``serve`` must present the coordinator's own certificate (``coordinator serve``
    listens with it).

    Raises
    ------
    ConfigError
        No [tls] table without ``insecure``, or the coordinator's TLS files cannot be read.
    """
    tls = choose_tls(federation.tls, insecure=federation.insecure, source=federation.source)
    if tls is not None:
        tls.read()  # a missing or expired file is the coordinator's problem: say so once, not once per entity
    # (name, address, certificate name, service) of each server to ask.
    targets = [(e.id, e.address, e.id, ENTITY_SERVICE) for e in federation.entities]
    if serve is not None:
        targets.append((PREDICTION, serve, tls.identity() if tls is not None else PREDICTION, PREDICTION_SERVICE))
    with ThreadPoolExecutor(max_workers=min(32, len(targets)), thread_name_prefix="health") as pool:
        answers = [
            pool.submit(check_health, address, tls=tls, peer=peer, service=service, deadline=deadline)
            for _, address, peer, service in targets
        ]
        return [
            ServerStatus(name, address, answer.result())
            for (name, address, _, _), answer in zip(targets, answers, strict=True)
        ]


def status_report(statuses: list[ServerStatus]) -> str:
    """One line per server (name, address, status, milliseconds, reason), then a summary line."""
    width = max(len(s.name) for s in statuses)
    address_width = max(len(s.address) for s in statuses)
    lines = [
        f"{s.name:<{width}}  {s.address:<{address_width}}  {s.answer.status:<11}  {s.answer.ms:7.1f} ms"
        + (f"  {s.answer.reason}" if s.answer.reason else "")
        for s in statuses
    ]
    failing = [s.name for s in statuses if not s.answer.serving]
    lines.append(
        f"all {len(statuses)} serving"
        if not failing
        else f"{len(statuses) - len(failing)} of {len(statuses)} serving; not serving: {', '.join(failing)}"
    )
    return "\n".join(lines)


def status_json(statuses: list[ServerStatus]) -> Mapping[str, Any]:
    """``{"ok": bool, "entities": [...], "serve": {...}}`` (``serve`` only when a prediction service was asked)."""
    entities = [s.as_dict() for s in statuses if s.name != PREDICTION]
    document: dict[str, Any] = {"ok": all(s.answer.serving for s in statuses), "entities": entities}
    served = [s.as_dict() for s in statuses if s.name == PREDICTION]
    if served:
        document["serve"] = served[0]
    return document
