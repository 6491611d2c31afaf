"""How ppsvm logs: the text format people read, one JSON object per line for log collectors, and request ids.

``ppsvm --log-format json`` writes each log record as one JSON object on one line of standard error:
``time`` (UTC, ISO 8601, milliseconds), ``level``, ``logger`` and ``message``, and where known ``entity``
(the entity id of an entity process, or the entity a coordinator's call went to), ``peer`` (the caller's
certificate name), ``method`` (the full gRPC method), ``request_id``, ``code`` (the call's status) and
``duration_ms``. The per-call fields come from :func:`call_fields`, which the server interceptor
(:class:`ppsvm.wire.server.Observe`) sets around each call, so every line a handler logs carries them.

Request ids join the two ends of a call: a client sends one in the ``x-request-id`` metadata
(:data:`REQUEST_ID_METADATA`, every channel :func:`ppsvm.wire.grpc_util.open_channel` opens does), the server
takes it when it is a short safe token (:func:`valid_request_id`) and makes its own otherwise.

One line per call (the ``ppsvm.access`` logger, :data:`ACCESS_LOGGER`): shown at info level in the JSON
format, and in the text format only with ``-v``, so the default text output is what it always was.

Nothing here decides what may be logged: the privacy rule (nothing derived from data in any log line)
is kept by the messages themselves and tested over the logs of a whole training run.
"""

from __future__ import annotations

import contextvars
import datetime
import json
import logging
import re
import secrets
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "ppsvm: %(message)s"
ACCESS_LOGGER = "ppsvm.access"
REQUEST_ID_METADATA = "x-request-id"
# The coordinator's run (a training, an evaluation, a prediction service): one token on all its calls, so that an
# entity's release log says which run each release served.
RUN_ID_METADATA = "x-ppsvm-run"
# Letters, digits, '.', '_' and '-', at most 64: a uuid, a ULID or our 16 hex digits fit, and nothing a caller
# sends can break a log line, forge another field or carry more than a short token.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
# The fields a record may carry (set by call_fields, by set_process_fields, or as ``extra=`` of one call).
FIELDS = ("entity", "peer", "method", "request_id", "run_id", "code", "duration_ms")

_call: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("ppsvm_call_fields", default=None)
_process: dict[str, Any] = {}


def new_request_id() -> str:
    """16 random hex digits: unique enough to join the lines of one call, and nothing else."""
    return secrets.token_hex(8)


def valid_request_id(value: str | bytes | None) -> str | None:
    """``value`` if it is a short safe token (letters, digits, ``._-``, at most 64), else None."""
    if isinstance(value, bytes):
        return None  # binary metadata (keys ending in -bin) is never a request id
    return value if value is not None and _REQUEST_ID.fullmatch(value) else None


@contextmanager
def call_fields(**fields: Any) -> Iterator[dict[str, Any]]:
    """Attach ``fields`` to every record logged in this thread until the block ends; yields them, to add to.

    Restored by value rather than by token: a streaming handler's generator may be closed from
    another context than the one it started in.
    """
    previous = _call.get()
    current = {**(previous or {}), **fields}
    _call.set(current)
    try:
        yield current
    finally:
        _call.set(previous)


def current_call_ids() -> dict[str, str]:
    """The request id and the caller's run id (each when known) of the call this thread is serving."""
    fields = _call.get() or {}
    return {key: fields[key] for key in ("request_id", "run_id") if fields.get(key)}


def set_process_fields(**fields: Any) -> None:
    """Fields every record of this process carries (an entity process: its entity id)."""
    _process.update(fields)


class _AddFields(logging.Filter):
    """Copies the process's and the current call's fields onto each record (a record's own ``extra`` wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for source in (_call.get() or {}, _process):
            for name, value in source.items():
                if not hasattr(record, name):
                    setattr(record, name, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the known fields present, and an exception."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        document: dict[str, Any] = {
            "time": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                document[name] = value
        if record.exc_info:
            document["exception"] = self.formatException(record.exc_info)
        return json.dumps(document, ensure_ascii=False, default=str)


def configure_logging(level: int, log_format: str = "text", stream: TextIO | None = None) -> None:
    """Set up the root logger for a ppsvm command: the text format (``ppsvm: message``) or JSON lines.

    Parameters
    ----------
    level : int
        logging.DEBUG (-v), INFO (default) or WARNING (-q).
    log_format : {"text", "json"}
    stream : text stream, optional
        Default standard error.
    """
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be one of {', '.join(LOG_FORMATS)}, got {log_format!r}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.addFilter(_AddFields())
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler])
    # The per-call lines: part of the JSON log, and in the text log only when asked for with -v.
    logging.getLogger(ACCESS_LOGGER).setLevel(
        logging.NOTSET if log_format == "json" or level <= logging.DEBUG else logging.WARNING
    )
    if log_format == "json":
        logging.captureWarnings(True)  # a Python warning would otherwise be a line that is not JSON
