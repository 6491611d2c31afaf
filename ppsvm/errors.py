"""Domain errors shared by entities, the coordinator and the CLI.

Each maps to one gRPC status code in the servicers, so a caller can tell a bad
request from a refused one from a data problem.
"""


class PpsvmError(Exception):
    """Base class: an error a user can act on; the CLI prints it without a traceback."""


class DataError(PpsvmError, ValueError):
    """Input data is malformed or inconsistent (names the file, row or column)."""


class ConfigError(PpsvmError, ValueError):
    """A configuration file or setting is missing, malformed or contradictory."""


class PrivacyError(PpsvmError):
    """A request would break a privacy rule of DESIGN.md section 2 and is refused."""


class ReleaseFailed(PpsvmError):
    """A computation over an entity's records failed after its release was charged (the text names no data)."""


class SolverError(PpsvmError):
    """The linear program could not be solved to optimality."""


class WireError(PpsvmError, ValueError):
    """An array on the wire is malformed: bad dtype, shape, size or a truncated stream."""


class EntityError(PpsvmError):
    """An entity could not be reached or answered with an error (names the entity)."""
