"""Making a gRPC server: who may call what, how many calls one caller may run, streams whose reader stalls.

Every server ppsvm runs (``ppsvm entity``, ``coordinator serve``, the in-process ones of the API) is
made by :func:`create_server`: with TLS, :class:`Authorize` checks each call against the caller's
certificate (its exact name and its roles); :class:`PeerLimits` caps the calls one caller runs at once
and cancels a stream whose reader stopped reading. Both refuse through
:func:`ppsvm.wire.grpc_util.abort`, so their status codes come from the one error taxonomy. Every server
also answers the standard health check (:mod:`ppsvm.wire.health`), through the same two interceptors.
Outside both, :class:`Observe` gives each call its request id and log fields, logs one line when it ends and,
when the server has metrics (:mod:`ppsvm.wire.metrics`), counts it.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import os
import signal
import sys
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping
from concurrent import futures
from dataclasses import dataclass
from types import FrameType
from typing import Any

import grpc

from ppsvm.constants import MAX_CALLS_PER_PEER, SERVER_WORKERS, SHUTDOWN_GRACE_S, STREAM_WRITE_TIMEOUT_S
from ppsvm.errors import CallLimitError, ConfigError, PrivacyError
from ppsvm.logs import (
    ACCESS_LOGGER,
    REQUEST_ID_METADATA,
    RUN_ID_METADATA,
    call_fields,
    new_request_id,
    valid_request_id,
)
from ppsvm.wire.certs import COORDINATOR, Role
from ppsvm.wire.grpc_util import SERVER_KEEPALIVE_OPTIONS, abort, host_of
from ppsvm.wire.health import HEALTH_SERVICE, OPEN_METHODS, Health, Readiness, add_health
from ppsvm.wire.metrics import PLAINTEXT_PEER, UNRECOGNISED_PEER, RpcMetrics, split_method
from ppsvm.wire.tls import TlsFiles, peer_party, server_credentials

logger = logging.getLogger(__name__)
access = logging.getLogger(ACCESS_LOGGER)

MAX_CALLS_PER_PEER_ENV = "PPSVM_MAX_CALLS_PER_PEER"
STREAM_WRITE_TIMEOUT_ENV = "PPSVM_STREAM_WRITE_TIMEOUT_S"


def method_roles(service: str, roles: Mapping[str, Collection[Role]]) -> dict[str, frozenset[Role]]:
    """Full gRPC method names (``/package.Service/Method``) of ``service``'s methods -> the roles that may call them."""
    return {f"/{service}/{method}": frozenset(allowed) for method, allowed in roles.items()}


Behaviour = Callable[[Any, grpc.ServicerContext], Any]


class WrappingInterceptor(grpc.ServerInterceptor):
    """A server interceptor that wraps each method's behaviour; subclasses say how, for unary and streaming replies.

    Every RPC of ppsvm takes a single request message; client-streaming handlers do not exist. A reply
    that is already serialised (bytes, as :func:`ppsvm.wire.chunks.encode_rows` writes a kernel block's
    messages) is sent as it is.
    """

    def _wrap_unary(self, behaviour: Behaviour, method: str) -> Behaviour:
        raise NotImplementedError

    def _wrap_stream(self, behaviour: Behaviour, method: str) -> Behaviour:
        raise NotImplementedError

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        codec = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": _serialised_as_is(handler.response_serializer),
        }
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(self._wrap_unary(handler.unary_unary, method), **codec)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(self._wrap_stream(handler.unary_stream, method), **codec)
        raise TypeError(f"{method}: only unary-request methods can be wrapped")


def _serialised_as_is(serialize: Callable[[Any], bytes] | None) -> Callable[[Any], bytes] | None:
    """``serialize``, except for a reply that is bytes already."""
    if serialize is None:
        return None

    def serialized(reply: Any) -> bytes:
        return reply if isinstance(reply, bytes) else serialize(reply)

    return serialized


class Authorize(WrappingInterceptor):
    """Refuse, with PERMISSION_DENIED, every call whose certificate names another party or lacks a role the method
    allows.

    Checked per call from the peer's certificate: its one DNS name compared exactly (a name in
    another case is another name) and its role URIs.

    Parameters
    ----------
    roles : collection of role, or mapping of str to collection of role
        The roles that may call every method, or per full method name (:func:`method_roles`);
        a method the mapping does not name is refused to everyone.
    identities : collection of str, optional
        Names that may call at all (entities: the coordinator their config names); None: any name.
    open_methods : collection of str
        Full method names any party the federation CA certified may call, whatever its name and roles
        (the health check); its certificate must still name one party.
    """

    def __init__(
        self,
        roles: Collection[Role] | Mapping[str, Collection[Role]],
        identities: Collection[str] | None = None,
        open_methods: Collection[str] = (),
    ) -> None:
        self.roles = roles
        self.identities = frozenset(identities) if identities is not None else None
        self.open_methods = frozenset(open_methods)

    def _allowed_roles(self, method: str) -> frozenset[Role]:
        if isinstance(self.roles, Mapping):
            return frozenset(self.roles.get(method, ()))
        return frozenset(self.roles)

    def _refusal(self, context: grpc.ServicerContext, method: str) -> str | None:
        """Why the caller may not call ``method``, or None if it may."""
        try:
            party = peer_party(context)
        except ValueError as exc:
            return f"the caller's certificate is not a ppsvm party's ({exc}) and may not call {method}"
        if party is None:
            return f"a caller without a certificate may not call {method}"
        if method in self.open_methods:
            return None
        allowed = self._allowed_roles(method)
        if self.identities is not None and party.name not in self.identities:
            return f"{party.name} may not call {method}; this server accepts only {', '.join(sorted(self.identities))}"
        if not allowed:
            return f"{method} is not open to any caller on this server"
        if not party.roles & allowed:
            held = (
                f"grants {', '.join(sorted(party.roles))}"
                if party.roles
                else "grants no ppsvm role (made before roles existed: make new ones with `ppsvm certs`)"
            )
            return (
                f"{party.name} may not call {method}: that needs a certificate with the role "
                f"{' or '.join(sorted(allowed))}, and {party.name}'s certificate {held}"
            )
        return None

    def _guard(self, behaviour: Behaviour, method: str) -> Behaviour:
        def checked(request: Any, context: grpc.ServicerContext) -> Any:
            refusal = self._refusal(context, method)
            if refusal is not None:
                logger.warning("refused a call from %s: %s", context.peer(), refusal)
                abort(context, PrivacyError(refusal))
            return behaviour(request, context)

        return checked

    _wrap_unary = _guard
    _wrap_stream = _guard


class _ObservedCall:
    """One call as :class:`Observe` sees it: its log fields, its start, and the metrics it is counted in."""

    def __init__(self, context: grpc.ServicerContext, method: str, metrics: RpcMetrics | None) -> None:
        self.started = time.perf_counter()
        self.method = method
        self.service, self.name = split_method(method)
        self.metrics = metrics
        metadata = dict(context.invocation_metadata() or ())
        sent, run = metadata.get(REQUEST_ID_METADATA), valid_request_id(metadata.get(RUN_ID_METADATA))
        try:
            party = peer_party(context)
            self.peer = party.name if party is not None else PLAINTEXT_PEER
            logged_peer = party.name if party is not None else context.peer()
        except ValueError:
            self.peer = logged_peer = UNRECOGNISED_PEER
        self.fields = {
            "peer": logged_peer,
            "method": method,
            "request_id": valid_request_id(sent) or new_request_id(),
            **({"run_id": run} if run else {}),
        }
        if metrics is not None:
            metrics.requests.labels(self.service, self.name, self.peer).inc()
            metrics.in_progress.labels(self.service, self.name).inc()

    def sent(self, message: Any) -> None:
        if self.metrics is not None:
            self.metrics.sent_messages.labels(self.service, self.name).inc()
            size = len(message) if isinstance(message, bytes) else message.ByteSize()
            self.metrics.sent_bytes.labels(self.service, self.name).inc(size)

    def finish(self, code: grpc.StatusCode) -> None:
        seconds = time.perf_counter() - self.started
        if self.metrics is not None:
            self.metrics.handled.labels(self.service, self.name, self.peer, code.name).inc()
            self.metrics.duration.labels(self.service, self.name).observe(seconds)
            self.metrics.in_progress.labels(self.service, self.name).dec()
        # Health probes come every few seconds: their lines only with -v.
        level = logging.DEBUG if self.service == HEALTH_SERVICE else logging.INFO
        access.log(
            level,
            "%s from %s: %s in %.1f ms (request %s)",
            self.method,
            self.fields["peer"],
            code.name,
            seconds * 1000,
            self.fields["request_id"],
            extra={**self.fields, "code": code.name, "duration_ms": round(seconds * 1000, 3)},
        )


def _code(context: grpc.ServicerContext, default: grpc.StatusCode) -> grpc.StatusCode:
    """The status the handler set or aborted with, else ``default`` (OK after a reply, UNKNOWN after a failure)."""
    # ServicerContext.code() exists since grpcio 1.38; the typeshed stubs do not list it yet.
    code = getattr(context, "code", lambda: None)()
    return code if isinstance(code, grpc.StatusCode) else default


class Observe(WrappingInterceptor):
    """Give every call a request id and its log fields, log one line when it ends, count it in ``metrics``.

    The request id is the caller's ``x-request-id`` when that is a short safe token
    (:func:`ppsvm.logs.valid_request_id`), else a new one; every line logged while the call's handler
    runs carries it, the caller's name and the method (:func:`ppsvm.logs.call_fields`). Outermost of the
    interceptors, so that refused calls are logged and counted too.

    Parameters
    ----------
    metrics : RpcMetrics, optional
        Where to count calls; None counts nothing.
    """

    def __init__(self, metrics: RpcMetrics | None = None) -> None:
        self.metrics = metrics

    def _wrap_unary(self, behaviour: Behaviour, method: str) -> Behaviour:
        def observed(request: Any, context: grpc.ServicerContext) -> Any:
            call = _ObservedCall(context, method, self.metrics)
            try:
                with call_fields(**call.fields):
                    reply = behaviour(request, context)
            except BaseException:
                call.finish(_code(context, grpc.StatusCode.UNKNOWN))
                raise
            call.sent(reply)
            call.finish(_code(context, grpc.StatusCode.OK))
            return reply

        return observed

    def _wrap_stream(
        self, behaviour: Callable[[Any, grpc.ServicerContext], Iterator[Any]], method: str
    ) -> Callable[[Any, grpc.ServicerContext], Iterator[Any]]:
        def observed(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            call = _ObservedCall(context, method, self.metrics)
            messages = iter(behaviour(request, context))
            code = grpc.StatusCode.OK
            try:
                while True:
                    # The fields are set only while the handler runs, never across a yield: a stream gRPC
                    # abandons may be closed later, from another thread.
                    with call_fields(**call.fields):
                        try:
                            message = next(messages)
                        except StopIteration:
                            break
                    call.sent(message)
                    yield message
                code = _code(context, grpc.StatusCode.OK)
            except GeneratorExit:
                code = grpc.StatusCode.CANCELLED  # dropped by gRPC: the caller cancelled or went away
                raise
            except BaseException:
                code = _code(context, grpc.StatusCode.UNKNOWN)
                raise
            finally:
                close = getattr(messages, "close", None)
                if close is not None:
                    with call_fields(**call.fields):
                        close()  # the inner interceptors' own cleanup (PeerLimits frees the caller's slot)
                call.finish(code)

        return observed


@dataclass(frozen=True)
class ServerLimits:
    """How much of a server one peer may hold, so that no caller can lock the others out.

    Attributes
    ----------
    max_calls_per_peer : int
        Calls one peer (one certificate identity; one host in plaintext) may have running at
        once; more are refused with RESOURCE_EXHAUSTED. Below the server's worker threads.
    stream_write_timeout_s : float
        Seconds one message of a server stream may wait for the reader to take it; then the
        stream is cancelled and its worker freed. A reader that stops reading otherwise holds
        a worker for ever: the worker blocks inside gRPC's send, where neither a check between
        messages nor keepalive (the peer's transport still answers pings) can reach it.
    """

    max_calls_per_peer: int = MAX_CALLS_PER_PEER
    stream_write_timeout_s: float = STREAM_WRITE_TIMEOUT_S

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> ServerLimits:
        """Defaults, overridden by ``PPSVM_MAX_CALLS_PER_PEER`` and ``PPSVM_STREAM_WRITE_TIMEOUT_S``.

        Environment variables rather than flags: every server (``ppsvm entity``, ``coordinator
        serve``, in-process ones) is made by :func:`create_server`, and an operator tunes them
        all the same way.

        Raises
        ------
        ConfigError
            A variable that is not a number.
        """
        limits = cls()
        try:
            if MAX_CALLS_PER_PEER_ENV in environ:
                limits = dataclasses.replace(limits, max_calls_per_peer=int(environ[MAX_CALLS_PER_PEER_ENV]))
            if STREAM_WRITE_TIMEOUT_ENV in environ:
                limits = dataclasses.replace(limits, stream_write_timeout_s=float(environ[STREAM_WRITE_TIMEOUT_ENV]))
        except ValueError as exc:
            raise ConfigError(
                f"{MAX_CALLS_PER_PEER_ENV} must be a whole number and {STREAM_WRITE_TIMEOUT_ENV} a number "
                f"of seconds: {exc}"
            ) from None
        return limits

    def check(self, max_workers: int) -> None:
        """ConfigError unless one peer leaves workers for the others and streams have a finite, positive timeout."""
        if not 1 <= self.max_calls_per_peer < max_workers:
            raise ConfigError(
                f"the calls one peer may run at once ({MAX_CALLS_PER_PEER_ENV}) must be at least 1 and below "
                f"the server's {max_workers} worker threads, got {self.max_calls_per_peer}"
            )
        if not (math.isfinite(self.stream_write_timeout_s) and self.stream_write_timeout_s > 0):
            raise ConfigError(
                f"{STREAM_WRITE_TIMEOUT_ENV} must be a positive number of seconds, got {self.stream_write_timeout_s}"
            )


class _Watchdog:
    """Cancels each stream whose pending message waited past its deadline; one thread for the whole process."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._due: dict[int, tuple[float, Callable[[], None]]] = {}
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float, expire: Callable[[], None]) -> int:
        """Call ``expire`` in ``seconds`` unless :meth:`disarm` is called first with the returned token."""
        with self._condition:
            token = next(self._tokens)
            self._due[token] = (time.monotonic() + seconds, expire)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="stream-write-watchdog", daemon=True)
                self._thread.start()
            self._condition.notify()
        return token

    def disarm(self, token: int) -> None:
        with self._condition:
            self._due.pop(token, None)

    def _run(self) -> None:
        while True:
            with self._condition:
                now = time.monotonic()
                expired = [token for token, (deadline, _) in self._due.items() if deadline <= now]
                callbacks = [self._due.pop(token)[1] for token in expired]
                if not callbacks:
                    next_deadline = min((deadline for deadline, _ in self._due.values()), default=None)
                    self._condition.wait(None if next_deadline is None else next_deadline - now)
                    continue
            # Outside the lock: cancelling wakes the stream's worker, which disarms.
            for expire in callbacks:
                expire()


_WATCHDOG = _Watchdog()


class PeerLimits(WrappingInterceptor):
    """Apply :class:`ServerLimits`: a per-peer cap on running calls and a write timeout on stream messages."""

    def __init__(self, limits: ServerLimits, max_workers: int) -> None:
        self.limits = limits
        self.max_workers = max_workers
        self._running: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _enter(self, context: grpc.ServicerContext, method: str) -> str:
        """Take a slot for the caller, or abort the call with RESOURCE_EXHAUSTED; returns the caller's key."""
        party = peer_party(context)
        # A certificate names who calls however many connections it opens; without one, the host does.
        peer = party.name if party is not None else host_of(context.peer())
        limit = self.limits.max_calls_per_peer
        with self._lock:
            admitted = self._running[peer] < limit
            if admitted:
                self._running[peer] += 1
        if not admitted:
            message = (
                f"{peer} already has {limit} calls running on this server, the most one caller may have; retry when "
                f"one ends, or raise the limit on the server with {MAX_CALLS_PER_PEER_ENV} (below its "
                f"{self.max_workers} worker threads)"
            )
            logger.warning("refused %s: %s", method, message)
            abort(context, CallLimitError(message))
        return peer

    def running(self) -> int:
        """Calls whose handlers are running now, over all callers."""
        with self._lock:
            return sum(self._running.values())

    def _leave(self, peer: str) -> None:
        with self._lock:
            self._running[peer] -= 1
            if not self._running[peer]:
                del self._running[peer]

    def _wrap_unary(self, behaviour: Behaviour, method: str) -> Behaviour:
        def limited(request: Any, context: grpc.ServicerContext) -> Any:
            peer = self._enter(context, method)
            try:
                return behaviour(request, context)
            finally:
                self._leave(peer)

        return limited

    def _wrap_stream(
        self, behaviour: Callable[[Any, grpc.ServicerContext], Iterator[Any]], method: str
    ) -> Callable[[Any, grpc.ServicerContext], Iterator[Any]]:
        timeout = self.limits.stream_write_timeout_s

        def limited(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            peer = self._enter(context, method)

            def expire() -> None:
                logger.warning(
                    "cancelled %s for %s (%s): the reader took no message for %g s (%s)",
                    method,
                    peer,
                    context.peer(),
                    timeout,
                    STREAM_WRITE_TIMEOUT_ENV,
                )
                context.cancel()

            try:
                for message in behaviour(request, context):
                    # gRPC asks for the next message only once this one is sent: the watch covers the send alone.
                    token = _WATCHDOG.arm(timeout, expire)
                    try:
                        yield message
                    finally:
                        _WATCHDOG.disarm(token)
            finally:
                # Also reached when gRPC drops a cancelled stream: closing the generator runs this.
                self._leave(peer)

        return limited


# Each server's PeerLimits, which counts the handlers still running when serve_until stops the server.
_CALL_COUNTERS: weakref.WeakKeyDictionary[grpc.Server, PeerLimits] = weakref.WeakKeyDictionary()
# Each server's health servicer, which serve_until turns NOT_SERVING before the stop.
_HEALTH: weakref.WeakKeyDictionary[grpc.Server, Health] = weakref.WeakKeyDictionary()


def create_server(
    address: str,
    register: Callable[[grpc.Server], None],
    *,
    tls: TlsFiles | None,
    allowed_peers: Collection[str] | None = None,
    roles: Collection[Role] | Mapping[str, Collection[Role]] = (COORDINATOR,),
    max_workers: int = SERVER_WORKERS,
    limits: ServerLimits | None = None,
    services: Collection[str] = (),
    readiness: Readiness | None = None,
    metrics: RpcMetrics | None = None,
) -> tuple[grpc.Server, int]:
    """Start a server on ``address`` (port 0 picks a free one); returns (server, bound port).

    Parameters
    ----------
    tls : TlsFiles or None
        Mutual TLS material; None serves plaintext (see :func:`ppsvm.wire.tls.choose_tls`), where
        no identity or role can be checked.
    allowed_peers : collection of str, optional
        Certificate identities allowed to call; None accepts any name the CA certified.
    roles : collection of role, or mapping of str to collection of role
        The certificate roles that may call every method, or per full method name
        (:func:`method_roles`; methods not named are refused). Default: the
        coordinator role for every method, which is what an entity serves.
    max_workers : int
        Threads serving calls; calls beyond them wait.
    limits : ServerLimits, optional
        Per-peer limits; default :meth:`ServerLimits.from_environment`.
    services : collection of str
        Full names of the services ``register`` adds, reported by the health check (as is ``""``, the
        whole server), which any party the CA certified may call (:mod:`ppsvm.wire.health`).
    readiness : callable, optional
        Asked on each health check: a reason not to claim SERVING, or None.
    metrics : RpcMetrics, optional
        Count every call there (:mod:`ppsvm.wire.metrics`); None: calls are only logged.

    Raises
    ------
    ConfigError
        The address cannot be bound, the TLS files cannot be read, or the limits leave no
        worker for a second peer.
    """
    limits = limits if limits is not None else ServerLimits.from_environment()
    limits.check(max_workers)
    # Observe outermost, so that refused calls are logged and counted; then Authorize: a refused caller never
    # takes one of its name's slots.
    interceptors: list[grpc.ServerInterceptor] = [Observe(metrics)]
    if tls is not None:
        interceptors.append(Authorize(roles, allowed_peers, open_methods=OPEN_METHODS))
    peer_limits = PeerLimits(limits, max_workers)
    interceptors.append(peer_limits)
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers), interceptors=interceptors, options=SERVER_KEEPALIVE_OPTIONS
    )
    _CALL_COUNTERS[server] = peer_limits
    register(server)
    _HEALTH[server] = add_health(server, services, readiness)
    try:
        port = (
            server.add_secure_port(address, server_credentials(tls))
            if tls is not None
            else server.add_insecure_port(address)
        )
    except RuntimeError as exc:
        raise ConfigError(f"cannot listen on {address}: {exc}") from exc
    if port == 0:
        raise ConfigError(f"cannot listen on {address} (in use or not a local address)")
    server.start()
    return server, port


def stop_on_signals() -> threading.Event:
    """An event that SIGINT or SIGTERM sets: servers run until it is set, then stop with a grace period."""
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    return stop


def stopping(server: grpc.Server) -> None:
    """Turn ``server``'s health check NOT_SERVING for good, before it stops: probes see it leave before its calls do."""
    health = _HEALTH.get(server)
    if health is not None:
        health.stopping()


def serve_until(stop: threading.Event, server: grpc.Server, listen: str, port: int, name: str) -> None:
    """Print ``listening on HOST:PORT`` (the line scripts wait for), serve until ``stop`` is set, then stop.

    For the server processes of the CLI: if handlers are still computing after the grace period, the process
    exits at once (``os._exit``) instead of returning, since nothing could stop those threads.

    Parameters
    ----------
    stop : threading.Event
        Set by :func:`stop_on_signals`, made before the server started so no signal is missed.
    server : grpc.Server
        Running; stopped with a grace of ``SHUTDOWN_GRACE_S`` for the calls in flight.
    listen, port : str, int
        The address asked for and the port bound (port 0 in ``listen`` picks a free one).
    name : str
        Who is serving, for the log.
    """
    print(f"listening on {host_of(listen)}:{port}", flush=True)
    # Wake up now and then: a signal delivered while the main thread blocks must not go unnoticed.
    while not stop.wait(timeout=0.5):
        pass
    logger.info("%s: shutting down", name)
    stopping(server)
    server.stop(SHUTDOWN_GRACE_S).wait()
    counter = _CALL_COUNTERS.get(server)
    lingering = counter.running() if counter is not None else 0
    if lingering:
        # gRPC cancels the calls but cannot stop their handler threads, and the interpreter's exit would wait for
        # them: minutes for a handler deep in a solver on a large cell. Whatever a handler released is already
        # in the release log (charged and fsynced before computing), so the process can go without them.
        logger.warning(
            "%s: %d call(s) still computing %g s after the stop; exiting without them",
            name,
            lingering,
            SHUTDOWN_GRACE_S,
        )
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
