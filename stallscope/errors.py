"""One exception tree for everything stallscope reports to users.

Lower layers raise these; the CLI and the server translate them at the edge into one line on
stderr plus a documented exit code, or one JSON error shape. Nothing below ``cli``/``server``
prints or exits.
"""

from __future__ import annotations


class StallscopeError(Exception):
    """Base of every error meant for a user. ``str(err)`` is a single self-contained line."""

    #: short machine-readable code used by the server's JSON error shape
    code = "error"
    #: exit code the CLI uses for this error
    exit_code = 2

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class UsageError(StallscopeError):
    """A command was called with arguments that cannot work (missing job, bad option)."""

    code = "usage"


class IngestError(StallscopeError):
    """A file or bundle could not be read at all (it is named in the message)."""

    code = "ingest"


class StoreError(StallscopeError):
    """The store is missing, unreadable or holds no such job."""

    code = "store"


class QueryError(StallscopeError):
    """A SQL query failed: syntax, unknown table or column, or a runtime error."""

    code = "query"


class AnalysisError(StallscopeError):
    """The data does not allow an analysis to run (e.g. no collectives, no steps)."""

    code = "analysis"


class CompressError(StallscopeError):
    """A model, factory, dataset or export step of ``stallscope compress`` failed."""

    code = "compress"


class CollectError(StallscopeError):
    """A collector could not prepare or finish a bundle."""

    code = "collect"
