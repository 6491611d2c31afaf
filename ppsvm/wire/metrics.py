"""Prometheus metrics of a ppsvm server, in a registry of its own, and the HTTP endpoint Prometheus scrapes.

Opt-in: ``--metrics-port`` on ``ppsvm entity`` and ``ppsvm coordinator serve``. Every server
:func:`ppsvm.wire.server.create_server` makes counts its calls through :class:`RpcMetrics` when given one
(the interceptor is :class:`ppsvm.wire.server.Observe`); an entity adds its releases and budget, the
prediction service its records scored.

**No label carries data.** Label values come from fixed sets only: the service and method of a
registered RPC (a method the server does not serve is never counted, so a caller cannot invent
one), a gRPC status code name, the caller's certificate name (a party of the federation, named by
the federation CA; ``plaintext`` without TLS, ``unrecognised`` for a certificate naming no one party),
an entity id and its mode, a release's RPC name. Never a record id, a count that is not public, a
value or an error message. ``tests/unit/test_metrics.py`` checks every label value after calls
that name real record ids.

A registry per server, not prometheus_client's global one: several servers in one process (the
API's in-process federations, the tests) would otherwise add the same metric twice.
"""

from __future__ import annotations

import argparse
import errno
import threading
import time
from pathlib import Path
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    start_http_server,
    write_to_textfile,
)

from ppsvm.errors import ConfigError

DEFAULT_METRICS_HOST = "127.0.0.1"
# Seconds: a health check takes milliseconds, a kernel block of a large cell or a solver minutes.
DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
# The caller label without a certificate, and for one that names no single ppsvm party.
PLAINTEXT_PEER = "plaintext"
UNRECOGNISED_PEER = "unrecognised"


class RpcMetrics:
    """The call metrics of one server, in ``registry`` (a new one by default).

    Metrics (``service`` is e.g. ``ppsvm.v1.Entity``, ``method`` e.g. ``KernelBlock``):

    - ``ppsvm_rpc_requests_total{service,method,peer}``: calls started;
    - ``ppsvm_rpc_handled_total{service,method,peer,code}``: calls finished, by status code (errors:
      ``code!="OK"``);
    - ``ppsvm_rpc_duration_seconds{service,method}``: a histogram of the time from the call reaching the
      server to its last reply message sent (or its failure);
    - ``ppsvm_rpc_sent_messages_total{service,method}`` and ``ppsvm_rpc_sent_bytes_total{service,method}``:
      reply messages and their serialized bytes (a kernel block streams in chunks of about 1 MiB);
    - ``ppsvm_rpc_in_progress{service,method}``: calls running now.

    Also the ``process_*`` metrics of the process (CPU, memory, open files), where the platform has them.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        registry = self.registry
        self.requests = Counter(
            "ppsvm_rpc_requests", "Calls started.", ["service", "method", "peer"], registry=registry
        )
        self.handled = Counter(
            "ppsvm_rpc_handled",
            "Calls finished, by gRPC status code.",
            ["service", "method", "peer", "code"],
            registry=registry,
        )
        self.duration = Histogram(
            "ppsvm_rpc_duration_seconds",
            "Seconds from a call's arrival to its last reply message or its failure.",
            ["service", "method"],
            buckets=DURATION_BUCKETS,
            registry=registry,
        )
        self.sent_messages = Counter(
            "ppsvm_rpc_sent_messages", "Reply messages sent.", ["service", "method"], registry=registry
        )
        self.sent_bytes = Counter(
            "ppsvm_rpc_sent_bytes",
            "Serialized bytes of the reply messages sent.",
            ["service", "method"],
            registry=registry,
        )
        self.in_progress = Gauge(
            "ppsvm_rpc_in_progress", "Calls running now.", ["service", "method"], registry=registry
        )
        ProcessCollector(registry=self.registry)


def split_method(full: str) -> tuple[str, str]:
    """``/package.Service/Method`` -> (``package.Service``, ``Method``)."""
    _, service, method = full.split("/", 2) if full.count("/") == 2 else ("", "", full)
    return service, method


class MetricsEndpoint:
    """The HTTP server Prometheus scrapes (``GET /metrics``), on a daemon thread; :meth:`close` stops it."""

    def __init__(self, server: WSGIServer, thread: threading.Thread, host: str, port: int) -> None:
        self._server, self._thread = server, thread
        self.host, self.port = host, port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def serve_metrics(registry: CollectorRegistry, host: str, port: int) -> MetricsEndpoint:
    """Serve ``registry`` over HTTP on ``host:port`` (port 0: a free one).

    The default host is loopback (:data:`DEFAULT_METRICS_HOST`): an entity runs on an organisation's
    own machines, and exposing even call counts on every interface is the operator's decision
    (``--metrics-host 0.0.0.0`` in a container or a pod, where Prometheus scrapes the pod's address).
    Plain HTTP: put it behind the organisation's network policy, as for any exporter.

    Raises
    ------
    ConfigError
        The port is taken or the host is not a local address.
    """
    if not 0 <= port <= 65535:
        raise ConfigError(f"--metrics-port must be a port number (0 to 65535), got {port}")
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        reason = "the port is in use" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
        raise ConfigError(
            f"cannot serve metrics on {host}:{port}: {reason} (choose another --metrics-port, or 0 for a free one)"
        ) from None
    return MetricsEndpoint(server, thread, host, int(server.server_port))


def write_training_metrics(path: Path, *, method: str, seconds: float, lp_seconds: float | None, n_train: int) -> None:
    """Write a finished training's figures for node_exporter's textfile collector (``--metrics-textfile``).

    A training job lives seconds to minutes: an endpoint of its own would rarely be scraped before it
    ends, and a Pushgateway is one more service to run. The textfile collector is Prometheus's way for
    batch jobs on a host that runs node_exporter: the file is replaced atomically, and its figures stay
    until the next training replaces them. Metrics (label ``method``: random-kernel, dp-hybrid, ...):
    ``ppsvm_training_seconds``, ``ppsvm_training_lp_seconds`` (random-kernel: the LP solve alone),
    ``ppsvm_training_records`` (training records, a count every entity publishes) and
    ``ppsvm_training_last_success_timestamp_seconds`` (alert on its age).
    """
    registry = CollectorRegistry()
    figures = {
        "ppsvm_training_seconds": ("Seconds the last successful training took, end to end.", seconds),
        "ppsvm_training_lp_seconds": ("Seconds its linear program took to solve.", lp_seconds),
        "ppsvm_training_records": ("Training records of the last successful training.", n_train),
        "ppsvm_training_last_success_timestamp_seconds": ("When it finished (Unix time).", time.time()),
    }
    for name, (documentation, value) in figures.items():
        if value is not None:
            Gauge(name, documentation, ["method"], registry=registry).labels(method).set(value)
    try:
        write_to_textfile(str(path), registry)
    except OSError as exc:
        raise ConfigError(f"cannot write the metrics file {path}: {exc.strerror or exc}") from None


def add_metrics_arguments(parser: argparse.ArgumentParser) -> None:
    """``--metrics-port`` and ``--metrics-host`` of ``ppsvm entity`` and ``coordinator serve`` (off without a port)."""
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="also serve Prometheus metrics over HTTP on this port (0: a free one, logged): call counts, errors by "
        "status code, latencies and bytes sent per RPC; labels never carry records or values. Default: off",
    )
    parser.add_argument(
        "--metrics-host",
        default=DEFAULT_METRICS_HOST,
        metavar="HOST",
        help="the address the metrics endpoint binds (default %(default)s, this machine only; 0.0.0.0 for every "
        "interface, e.g. in a container that Prometheus scrapes from outside)",
    )


def metrics_at(args: argparse.Namespace) -> tuple[str, int] | None:
    """(host, port) of the metrics endpoint the command line asks for, or None."""
    if args.metrics_port is None:
        return None
    if not 0 <= args.metrics_port <= 65535:
        raise ConfigError(f"--metrics-port must be a port number (0 to 65535), got {args.metrics_port}")
    return args.metrics_host, args.metrics_port
