"""Progress: the handler's latest ``ctx.progress()``, written only with the token that runs it.

A progress update is not a transition: it changes no state, so it is one fenced UPDATE of the
``progress`` column alone. The JSON is built by the database (``JSONObject``), so that ``at``
is the database's clock, as every other time the protocol writes; the values travel as
parameters. How often a handler's updates are written is the runtime's business
(:mod:`django_leasejobs.runtime.progress`); here each call is one statement.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any, NamedTuple

from django.db.models import FloatField, IntegerField, TextField, Value
from django.db.models.functions import Cast, JSONObject

from ..core.validation import MAX_PROGRESS_MESSAGE
from ..db.dbtime import DbNow
from ..db.deadlocks import retry_deadlocks
from ..errors import JobArgumentsError, JobValidationError
from ..models import Job, Status
from .base import job_database, logger

MESSAGE_MAX = MAX_PROGRESS_MESSAGE
"""The longest ``message`` kept, in characters; a longer one is cut to it (docs/progress.md)."""


class ProgressUpdate(NamedTuple):
    """One validated ``ctx.progress(done, total, message)``."""

    done: float
    total: float | None
    message: str


def progress_update(done: Any, total: Any = None, message: Any = "") -> ProgressUpdate:
    """Check a handler's update; a clear ``JobValidationError`` (or, for a wrong type,
    ``JobArgumentsError``) when it cannot be stored.

    ``done`` and ``total`` are finite numbers >= 0 (``total`` may be None: unknown), with
    ``total >= done``; ``message`` is a str without NUL characters, cut to ``MESSAGE_MAX``.
    """
    done = _number(done, "done")
    if total is not None:
        total = _number(total, "total")
        if total < done:
            raise JobValidationError(f"progress: total ({total:g}) is less than done ({done:g}).")
    if not isinstance(message, str):
        raise JobArgumentsError(f"progress: message must be a str, not {type(message).__name__}.")
    if "\x00" in message:
        raise JobValidationError("progress: message contains a NUL character.")
    return ProgressUpdate(done, total, message[:MESSAGE_MAX])


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, Real):
        raise JobArgumentsError(f"progress: {name} must be a number, not {type(value).__name__}.")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise JobValidationError(f"progress: {name} must be a finite number >= 0, not {value!r}.")
    return int(number) if number.is_integer() else number


def _number_value(number: float | None) -> Cast:
    """A parameter typed as the number is, so that 3 is stored as 3, not 3.0; cast in the SQL,
    as a parameter bound on the server has no type of its own inside a JSON object."""
    return Cast(Value(number), IntegerField() if isinstance(number, int) else FloatField())


@retry_deadlocks
def record_progress(job_id: int, attempt: int, update: ProgressUpdate) -> bool:
    """Store ``update`` as the job's progress, only if ``attempt`` still runs it.

    False (logged at DEBUG, not an error) when the token is stale or the attempt has ended:
    a late update from a worker that lost its lease changes nothing.
    """
    using = job_database()
    changed = (
        Job.objects.using(using)
        .filter(pk=job_id, attempt=attempt, status=Status.RUNNING)
        .update(
            progress=JSONObject(
                done=_number_value(update.done),
                total=_number_value(update.total),
                message=Cast(Value(update.message), TextField()),
                at=DbNow(),
            )
        )
    )
    if not changed:
        logger.debug("job.stale id=%s attempt=%s action=progress", job_id, attempt)
    return bool(changed)
