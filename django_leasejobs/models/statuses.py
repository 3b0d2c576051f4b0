"""A job's states, and the groups of them the protocol and the readers filter by.

Apart from the ``Job`` table, so that what a state means (a docstring per member, which the
reference shows) and the SQL tests of the partial indexes are read in one short place.
"""

from __future__ import annotations

from django.db import models
from django.db.models.expressions import RawSQL


class Status(models.TextChoices):
    """The states of a job, and what moves a job out of each one.

    pending -> running -> succeeded | failed | dead; pending/failed -> cancelled;
    running -> cancelled when an operator's cancel request reaches the owning worker.
    """

    PENDING = "pending", "Pending"
    """Waiting for ``run_at`` (new, released at shutdown, or snoozed by its handler). Left by a
    worker's claim (-> running) or an operator's cancel."""

    RUNNING = "running", "Running"
    """Leased by ``lease_owner`` until ``lease_expires_at``; the worker's heartbeat extends it.
    Left by complete (-> succeeded), fail (-> failed or dead; the handler's ``Retry`` too),
    release or the handler's ``Snooze`` (-> pending, or dead past the snooze cap) or, once the
    lease has expired, by lease recovery (-> failed, or dead when no attempt is left). An
    operator's cancel only records ``cancel_requested_at``: the owning worker then ends the
    attempt (-> cancelled), and any other end of the attempt becomes cancelled too."""

    SUCCEEDED = "succeeded", "Succeeded"
    """Final. The handler returned under the current attempt token."""

    FAILED = "failed", "Failed"
    """An attempt failed or its lease expired; a retry waits for ``run_at`` (now + backoff, or
    the time the handler's ``Retry`` gave).
    Left like ``pending``: claimed by a worker when due, or cancelled by an operator."""

    DEAD = "dead", "Dead"
    """Final. Attempts exhausted, a permanent error (or one ``retry_on`` does not list), too
    many snoozes, or an unregistered name: a ``DeadLetter``
    row holds its history. A replay makes a *new* job; this one never runs again."""

    CANCELLED = "cancelled", "Cancelled"
    """Final. An operator cancelled it: before it ran, or while it ran (by its worker, once it
    learned of ``cancel_requested_at``)."""


CLAIMABLE = (Status.PENDING, Status.FAILED)
LIVE = (Status.PENDING, Status.RUNNING, Status.FAILED)
FINAL = (Status.SUCCEEDED, Status.DEAD, Status.CANCELLED)

# The waiting, running and final statuses as filters, written as the partial indexes'
# conditions write them. SQLite uses a partial index only for a statement that repeats its
# condition's terms with the same constants (a bound parameter never matches), so the ORM's
# own ``status__in=...`` reads the whole table there. Constant SQL: no value from outside.
IS_WAITING = RawSQL("status IN ('pending', 'failed')", (), output_field=models.BooleanField())
IS_RUNNING = RawSQL("status = 'running'", (), output_field=models.BooleanField())
IS_FINAL = RawSQL(
    "status IN ('succeeded', 'dead', 'cancelled')", (), output_field=models.BooleanField()
)
