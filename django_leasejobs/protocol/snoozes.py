"""Snooze: the handler hands its claim back to run again later, without spending an attempt.

How this keeps fencing and the attempt budget apart: the claim that ran the handler already
raised ``attempt`` (the fencing token), and the next claim raises it again, so a stale worker
of this attempt can never write once the job runs again. What a snooze changes is the charge:
it adds one to ``released``, as a graceful shutdown's release does, and the budget is
``attempt - released`` everywhere (the retry rule, lease recovery, the invariants, the admin).
``max_attempts`` is never touched. ``snoozes`` counts the snoozed claims alone, so that
``LEASEJOBS_MAX_SNOOZES`` bounds a handler that would snooze for ever.

The common case is one statement guarded by (id, attempt, running), no cancel request and the
cap not reached. When it changes no row, a read under the token guard says why, and the write
that follows is guarded again: ``cancel_attempt`` (an operator asked to cancel), ``fail``
without a retry (dead, ``snoozed too often``), or nothing (the token is stale).
"""

from __future__ import annotations

import datetime as dt

from django.db.models import F

from ..db.deadlocks import retry_deadlocks
from ..dialects import after
from ..models import Job, Status
from ..retries import When
from .base import Failure, Outcome, fenced_outcome, job_database
from .cancels import cancel_attempt
from .failures import fail

SNOOZED_TOO_OFTEN = "snoozed too often"
"""The dead letter's reason (and the error's kind) past ``LEASEJOBS_MAX_SNOOZES``."""


@retry_deadlocks
def snooze(
    job_id: int, attempt: int, when: When, *, max_snoozes: int, traceback: str = ""
) -> Outcome:
    """Make the running job ``pending`` again at ``when`` (seconds from the database's now, or
    a moment) without charging the attempt; ``Outcome.SNOOZED``.

    Past ``max_snoozes`` snoozes the job is dead-lettered instead (``Outcome.DEAD``, reason
    ``snoozed too often``, ``traceback`` in its history); a job an operator asked to cancel
    ends ``cancelled``; a stale token changes nothing (``Outcome.STALE``).
    """
    run_at = when if isinstance(when, dt.datetime) else after(when)
    held = Job.objects.using(job_database()).filter(
        pk=job_id, attempt=attempt, status=Status.RUNNING
    )
    changed = held.filter(cancel_requested_at=None, snoozes__lt=max_snoozes).update(
        status=Status.PENDING,
        run_at=run_at,
        released=F("released") + 1,
        snoozes=F("snoozes") + 1,
        lease_owner="",
        lease_expires_at=None,
    )
    if changed:
        return fenced_outcome(changed, "snoozed", job_id, attempt, Outcome.SNOOZED)
    row = held.values("cancel_requested_at").first()
    if row is None:
        return fenced_outcome(0, "snoozed", job_id, attempt, Outcome.STALE)
    if row["cancel_requested_at"] is not None:
        return cancel_attempt(job_id, attempt)
    failure = Failure(
        f"Snooze: the handler asked to snooze again after {max_snoozes} snoozes, the most "
        "LEASEJOBS_MAX_SNOOZES allows.",
        traceback,
        kind=SNOOZED_TOO_OFTEN,
    )
    return fail(job_id, attempt, failure, retryable=False)
