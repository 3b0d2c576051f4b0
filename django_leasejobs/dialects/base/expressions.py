"""The ORM's fragments of a claim, each written once: a lease's end and an attempt's start.

Both are evaluated by the database inside the statement that writes them (its clock, never the
worker's); the plain claim and the limited claim of the ORM's dialect write the same columns.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db.models import F, QuerySet
from django.db.models.expressions import ExpressionWrapper, Value
from django.db.models.fields import DateTimeField

from ...db.dbtime import DbNow
from ...models import Job, Status


def after(seconds: float) -> ExpressionWrapper:
    """The database's now plus ``seconds``, as an expression evaluated inside the statement."""
    return ExpressionWrapper(
        DbNow() + Value(dt.timedelta(seconds=seconds)), output_field=DateTimeField()
    )


def attempt_start(worker_id: str) -> dict[str, Any]:
    """What a claim writes on a row it leases to ``worker_id`` (with ``lease_expires_at``):
    running, the next attempt (the fencing token), its owner, and when it started."""
    return {
        "status": Status.RUNNING,
        "attempt": F("attempt") + 1,
        "lease_owner": worker_id,
        "started_at": DbNow(),
    }


def start_attempts(claimed: QuerySet[Job], worker_id: str, lease_seconds: float) -> None:
    """Lease the rows of ``claimed`` (a guarded queryset: the compare-and-set) to ``worker_id``.

    A job's own ``lease_seconds`` wins over the worker's: those rows are updated one by one,
    the rest in one statement.
    """
    running = attempt_start(worker_id)
    custom = list(claimed.exclude(lease_seconds=None).values_list("id", "lease_seconds"))
    for job_id, seconds in custom:
        claimed.filter(id=job_id).update(
            **running, lease_expires_at=after(seconds or lease_seconds)
        )
    claimed.filter(lease_seconds=None).update(**running, lease_expires_at=after(lease_seconds))
