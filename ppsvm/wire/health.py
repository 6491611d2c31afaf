"""Standard gRPC health checking (``grpc.health.v1.Health``) on every ppsvm server, and the check a prober makes.

Every server :func:`ppsvm.wire.server.create_server` makes answers ``Check`` for the whole server
(service ``""``) and for each ppsvm service it runs (``ppsvm.v1.Entity``, ``ppsvm.v1.Coordinator``):
SERVING, or NOT_SERVING once it is stopping or while its readiness test fails (an entity whose release
log cannot be written, since it could then release nothing). Container healthchecks (``ppsvm health``),
Kubernetes gRPC or exec probes and ``ppsvm coordinator status`` all ask the same thing.

Who may ask: over mutual TLS, any certificate the federation CA issued for one party name, whatever its
name and roles (:data:`OPEN_METHODS`). An answer is one of two words about the server and nothing about
its records, so it needs no role; and an entity container can then probe itself with its own
certificate, although the entity otherwise answers only its coordinator. The caller still takes one of
its name's call slots (:class:`ppsvm.wire.server.PeerLimits`) like any call. ``Watch`` is not served:
a watch holds a server thread for as long as the caller keeps it open, so a few certified names could
park every worker; probes poll ``Check`` instead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ppsvm.wire.grpc_util import open_channel, tls_failure
from ppsvm.wire.rpc import ppsvm_pb2 as pb
from ppsvm.wire.tls import TlsFiles

logger = logging.getLogger(__name__)

# The names entities and the prediction service report their own service under.
ENTITY_SERVICE = pb.DESCRIPTOR.services_by_name["Entity"].full_name
PREDICTION_SERVICE = pb.DESCRIPTOR.services_by_name["Coordinator"].full_name

HEALTH_SERVICE = health.SERVICE_NAME
CHECK_METHOD = f"/{HEALTH_SERVICE}/Check"
WATCH_METHOD = f"/{HEALTH_SERVICE}/Watch"
# Methods any certified party may call, whatever its name and roles (the module's docstring says why).
OPEN_METHODS = frozenset({CHECK_METHOD})
OVERALL = health.OVERALL_HEALTH
SERVING = "SERVING"
UNREACHABLE = "unreachable"
REFUSED = "refused"

# Why a server should not claim SERVING now, or None when it may; called on every Check, so it must be cheap.
Readiness = Callable[[], str | None]


class Health(health.HealthServicer):
    """The Health servicer of one server: its services SERVING unless ``readiness`` names a problem or it stops.

    Parameters
    ----------
    services : collection of str
        Full names of the services the server runs; each, and ``""`` for the whole server, is reported.
    readiness : callable, optional
        Asked on every Check; a reason (logged when it changes) turns every service NOT_SERVING until it
        returns None again.
    """

    def __init__(self, services: Collection[str], readiness: Readiness | None = None) -> None:
        super().__init__()
        self.services = (OVERALL, *services)
        self.readiness = readiness
        self._problem: str | None = None
        self._problem_lock = threading.Lock()
        for service in self.services:
            self.set(service, health_pb2.HealthCheckResponse.SERVING)

    def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        if self.readiness is not None:
            self._refresh(self.readiness())
        return super().Check(request, context)

    def Watch(  # type: ignore[override]
        self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext, send_response_callback: None = None
    ) -> None:
        context.abort(
            grpc.StatusCode.UNIMPLEMENTED,
            "this server answers Check only: a Watch would hold one of its threads for as long as it stays open",
        )

    def _refresh(self, problem: str | None) -> None:
        with self._problem_lock:
            if problem == self._problem:
                return
            self._problem = problem
            if problem is not None:
                logger.warning("health: NOT_SERVING: %s", problem)
            else:
                logger.info("health: SERVING again")
            status = health_pb2.HealthCheckResponse.NOT_SERVING if problem else health_pb2.HealthCheckResponse.SERVING
            for service in self.services:
                self.set(service, status)  # ignored once the server is stopping

    def stopping(self) -> None:
        """NOT_SERVING for good: the server is about to stop (called before its grace period)."""
        self.enter_graceful_shutdown()


def add_health(server: grpc.Server, services: Collection[str], readiness: Readiness | None = None) -> Health:
    """Register a :class:`Health` servicer for ``services`` on ``server`` (not started yet); returns it."""
    servicer = Health(services, readiness)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    return servicer


@dataclass(frozen=True)
class HealthAnswer:
    """What one health check found.

    Attributes
    ----------
    status : str
        The server's answer (``SERVING``, ``NOT_SERVING``, ``SERVICE_UNKNOWN``, ``UNKNOWN``), or
        ``unreachable`` (no connection, failed handshake, no answer in time) or ``refused`` (the
        server answered the call with an error status).
    reason : str
        Why it is not SERVING, for a person; empty when it is.
    ms : float
        Milliseconds from opening the channel to the answer or the failure (connection and TLS handshake
        included: a fresh channel per check).
    """

    status: str
    reason: str
    ms: float

    @property
    def serving(self) -> bool:
        return self.status == SERVING


def check_health(
    address: str, *, tls: TlsFiles | None, peer: str, service: str = OVERALL, deadline: float
) -> HealthAnswer:
    """Ask the server at ``address``, whose certificate must name ``peer``, whether ``service`` is SERVING.

    Never raises for what the server or the network does (that is the answer); ConfigError only where
    ``tls``'s files cannot be read.
    """
    started = time.monotonic()
    with open_channel(address, tls=tls, peer=peer) as channel:
        try:
            # The method itself rather than HealthStub, which the typeshed stubs leave without methods.
            check = channel.unary_unary(
                CHECK_METHOD,
                request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                response_deserializer=health_pb2.HealthCheckResponse.FromString,
            )
            reply = check(health_pb2.HealthCheckRequest(service=service), timeout=deadline)
        except grpc.RpcError as error:
            status, reason = _failure(error, peer, service, deadline)
            return HealthAnswer(status, reason, _ms_since(started))
    name = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    reason = "" if name == SERVING else _NOT_SERVING_REASONS.get(name, f"the server reports {name}")
    return HealthAnswer(name, reason, _ms_since(started))


_NOT_SERVING_REASONS = {
    "NOT_SERVING": "the server is stopping, or cannot serve now (an entity: its release log cannot be written; "
    "its own log says why)",
    "SERVICE_UNKNOWN": "the server does not run the service asked about",
}


def _failure(error: grpc.RpcError, peer: str, service: str, deadline: float) -> tuple[str, str]:
    code = error.code() if hasattr(error, "code") else None
    raw = error.details() if hasattr(error, "details") else None
    details = raw if raw is not None else str(error)
    if code is grpc.StatusCode.UNAVAILABLE:
        if tls_failure(details):
            return UNREACHABLE, (
                f"the TLS handshake failed: the server must present a certificate for {peer!r} from the federation "
                f"CA, and accept this one: {details}"
            )
        return UNREACHABLE, details
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return UNREACHABLE, f"no answer within {deadline:g} s"
    if code is grpc.StatusCode.NOT_FOUND:  # the reference servicer's answer for a name it does not know
        return REFUSED, f"the server does not run the service {service!r}"
    if code is grpc.StatusCode.UNIMPLEMENTED:
        return REFUSED, "the server has no health service (a ppsvm older than health checking, or not ppsvm)"
    name = code.name if code is not None else "error"
    return REFUSED, f"{name}: {details}"


def _ms_since(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 1)
