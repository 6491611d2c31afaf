"""The one taxonomy of errors a user can meet: bad data, bad settings, refusals, peers that fail.

Every kind derives from :class:`PpsvmError`. A server answers each kind with one gRPC status code
(the mapping is ``ppsvm.wire.grpc_util.status_for``); the ``ppsvm`` command prints any of them on one
line, without a traceback, and exits with status 1 (``ppsvm.cli.main``). The docs' "Errors and exit
status" has the table.

The pure math of ``ppsvm.core`` raises ValueError (or TypeError, for an argument of the wrong type)
when a caller breaks a function's documented preconditions: that is a programming error, since
every caller checks user input first and raises one of the kinds below. DataError, ConfigError and
WireError are ValueErrors too, so code that catches ValueError still catches them.
"""


class PpsvmError(Exception):
    """Base class: an error a user can act on; the CLI prints it without a traceback."""


class DataError(PpsvmError, ValueError):
    """Input data is malformed or inconsistent (names the file, row or column)."""


class ConfigError(PpsvmError, ValueError):
    """A configuration file or setting is missing, malformed or contradictory, or a file it names cannot be
    read or written."""


class PrivacyError(PpsvmError):
    """A request is refused: it would break a privacy rule of docs/design.md section 2, or the caller's certificate
    does not allow it."""


class ReleaseFailed(PpsvmError):
    """A computation over an entity's records failed after its release was charged (the text names no data)."""


class SolverError(PpsvmError):
    """The linear program could not be solved to optimality."""


class WireError(PpsvmError, ValueError):
    """An array on the wire is malformed: bad dtype, shape, size or a truncated stream."""


class CallLimitError(PpsvmError):
    """A caller already runs as many calls on a server as one caller may; it may retry when one ends."""


class CallCancelled(PpsvmError):
    """The caller cancelled a call or its deadline passed, so the server stopped computing its answer."""


class EntityError(PpsvmError):
    """An entity could not be reached or answered with an error (names the entity).

    ``refused`` says the entity was reached and refused the request itself (another request may succeed at
    once); False for an unreachable entity, a missed deadline or a malformed answer.
    """

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused


class PpsvmWarning(UserWarning):
    """Advice for users of the Python API (a weak basis, a fallback solver): ``warnings`` filters can silence it by
    this category. The command line logs the same advice instead."""
