"""The running attempt as ``logging`` sees it: a context variable, and a filter that copies it
onto records.

``CURRENT`` is set by the worker around a handler's call (:mod:`django_leasejobs.runtime.job_logs`)
in the handler's own context, so a sync handler's thread and an async handler's task (and the
tasks and ``sync_to_async`` calls it starts, which copy its context) each see their own attempt,
and any other code sees none. It holds nothing but what a log line needs, and no model: this
module is imported by a project's ``LOGGING`` before the apps are loaded.

:class:`JobFields` is the way a project's own handlers print ``%(job_id)s``, ``%(job_name)s`` and
``%(attempt)s``: Python's logging offers no per-process hook that runs before every handler
except the record factory, which is process-wide (``setLogRecordFactory``) and which this app
never replaces. A filter on the project's handler is the project's own choice and runs before
that handler formats the record; outside a job it sets the three to ``None``, so a format that
names them never fails.
"""

from __future__ import annotations

import contextvars
import logging
from typing import NamedTuple


class Attempt(NamedTuple):
    """What a log line says of the running attempt."""

    job_id: int
    job_name: str
    attempt: int


CURRENT: contextvars.ContextVar[Attempt | None] = contextvars.ContextVar(
    "django_leasejobs_attempt", default=None
)
"""The attempt whose handler runs in this context, or None (structlog users read it in a
processor: ``CURRENT.get()``)."""


def stamp(record: logging.LogRecord, attempt: Attempt | None) -> None:
    """Put the attempt's fields on the record (``None`` each outside a job)."""
    record.job_id = attempt.job_id if attempt else None
    record.job_name = attempt.job_name if attempt else None
    record.attempt = attempt.attempt if attempt else None


class JobFields(logging.Filter):
    """Adds ``job_id``, ``job_name`` and ``attempt`` to every record a handler formats (add it
    to the handler's ``filters`` in ``LOGGING``); never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        stamp(record, CURRENT.get())
        return True
