"""Jobs: the rows the lease protocol writes, and their columns.

Their indexes and constraints are in :mod:`.job_indexes`, their states in :mod:`.statuses`,
dead letters in :mod:`.dead_letters` and recorded effects in :mod:`.effects`.

Every state change of a ``Job`` is made by :mod:`django_leasejobs.protocol`; nothing else writes
``status``, ``attempt`` or the lease columns. The models only describe the rows.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from django.db import models
from django.db.models.functions import Now

from . import job_indexes
from .statuses import Status

# Status stays importable from here: the reference (docs/reference/models.md) names it so.
__all__ = ["Job", "ProgressField", "Status"]

_FRACTION = re.compile(r"\.(\d{1,6})")


class ProgressField(models.JSONField):
    """The handler's latest ``ctx.progress()``: ``{"done", "total", "message", "at"}``.

    ``at`` is the database's clock, put into the JSON by the UPDATE itself, so each database
    spells it its own way (PostgreSQL ISO 8601 with an offset and trailing zeros trimmed,
    SQLite and MySQL a space and no offset, in UTC). It is read back as one spelling:
    ISO 8601 in UTC with microseconds, ``"2026-01-31T12:00:00.250000+00:00"``.
    """

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        value = super().from_db_value(value, expression, connection)
        if isinstance(value, dict) and isinstance(value.get("at"), str):
            value["at"] = iso_utc(value["at"])
        return value


def iso_utc(text: str) -> str:
    """A timestamp as a database wrote it, in ISO 8601 UTC with six fractional digits."""
    text = _FRACTION.sub(lambda m: "." + m.group(1).ljust(6, "0"), text.replace(" ", "T", 1))
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:  # not a timestamp: left as it was written
        return text
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment.astimezone(dt.timezone.utc).isoformat(timespec="microseconds")


class Job(models.Model):
    """One unit of work, its arguments, and its lease.

    ``attempt`` is the fencing token: every claim increments it, and every write by a worker is
    guarded by ``WHERE id = ? AND attempt = ? AND status = 'running'``. ``released`` counts claims
    handed back unspent (at a graceful shutdown, or snoozed by the handler); they raise the token
    but are not charged against ``max_attempts`` (the budget is ``attempt - released``).
    ``snoozes`` counts the snoozed ones alone, against ``LEASEJOBS_MAX_SNOOZES``.
    """

    # Indexed with the id (``leasejobs_name``) for the admin's filter and search by name.
    name = models.CharField(max_length=200, help_text="Registered dotted path.")
    args = models.JSONField(default=list, blank=True)
    kwargs = models.JSONField(default=dict, blank=True)
    queue = models.CharField(max_length=100, default="default")
    priority = models.SmallIntegerField(default=0, help_text="Higher runs first (-100..100).")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    run_at = models.DateTimeField(db_default=Now())
    attempt = models.PositiveIntegerField(default=0, help_text="Fencing token: claims so far.")
    released = models.PositiveIntegerField(default=0, help_text="Claims released unspent.")
    # db_default too: a process still on the code before this column inserts rows without it.
    snoozes = models.PositiveIntegerField(
        default=0,
        db_default=0,
        help_text="Claims the handler snoozed (raise Snooze): counted in released too.",
    )
    # A claim whose name this worker could not run hands the attempt back (protocol.defer):
    # counted in released too, so the budget is untouched. db_default: older code inserts.
    deferrals = models.PositiveIntegerField(
        default=0,
        db_default=0,
        help_text="Claims handed back by workers that could not run this name (not charged).",
    )
    first_deferred_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="The first such claim: LEASEJOBS_UNKNOWN_JOB_GRACE counts from here.",
    )
    deferred_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text="The run_at the last deferral set: a worker that knows the name makes the job "
        "due at once only while run_at is still this (no other write moved it).",
    )
    # The @job(version=) the arguments were written for: a worker upgrades older ones before
    # the call and defers newer ones (docs/deploying-changes.md). db_default: rows inserted by
    # older code, and every row already there, are version 1.
    version = models.PositiveIntegerField(
        default=1,
        db_default=1,
        help_text="The job's version its arguments were written for (@job(version=)).",
    )
    max_attempts = models.PositiveIntegerField(default=5)
    lease_seconds = models.FloatField(null=True, blank=True)
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    dedupe_key = models.CharField(max_length=200, null=True, blank=True)
    # Unique with the job's name (``leasejobs_live_dedupe_per_name``): a key belongs to a name.
    live_dedupe_key = models.CharField(
        max_length=200,
        null=True,
        blank=True,
        editable=False,
        help_text="dedupe_key while the job is live, NULL once final: the unique key that makes "
        "dedupe apply to live jobs only, on every database (MariaDB has no partial indexes).",
    )
    # db_index=False: the unique (schedule, occurrence_at) constraint leads with this column
    # and serves every lookup by schedule (and InnoDB's foreign key).
    schedule = models.ForeignKey(
        "Schedule",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="jobs",
        db_index=False,
    )
    occurrence_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now())
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Written TRUE with every final state (succeeded, dead, cancelled) and never after. On
    # PostgreSQL it is the key of the table's partitions: the row then leaves the live jobs'
    # partition for the history partitions (docs/operations.md#history-partitions).
    in_history = models.BooleanField(
        default=False,
        db_default=False,
        editable=False,
        help_text="The job is final and its row is in the history (PostgreSQL: its partitions).",
    )
    retried_at = models.DateTimeField(
        null=True,
        blank=True,
        editable=False,
        help_text="When the latest failed attempt was set to be retried: the dashboard's charts "
        "count retries per minute by it.",
    )
    last_error = models.TextField(blank=True, default="")
    errors = models.JSONField(
        default=list, blank=True, help_text="Attempt history: one entry per failed attempt."
    )
    # What the handler returned, as JSON, written by the completion that made the job
    # succeeded (NULL before, and for a handler returning None); a value JSON cannot store
    # dead-letters the job instead ("Unstorable return value"). Read it with fn.get_result()
    # or job.wait() (docs/results.md).
    result = models.JSONField(null=True, blank=True)
    # The handler's latest ctx.progress(), written by protocol.record_progress (fenced by the
    # attempt, at most about once a second) and with the attempt's end (docs/progress.md).
    progress = ProgressField(
        null=True,
        blank=True,
        editable=False,
        help_text='The latest progress the handler reported: {"done", "total", "message", "at"}.',
    )
    finished_by = models.CharField(
        max_length=200, blank=True, default="", help_text="The worker whose attempt succeeded."
    )
    cancel_requested_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When an operator asked to cancel the job while it was running; its worker "
        "ends the attempt as cancelled.",
    )
    # The limits a claim enforces, computed at enqueue from @job(concurrency_key=...,
    # rate_limit=...) and stored, so the claim never calls user code (docs/flow-control.md).
    concurrency_key = models.CharField(max_length=200, null=True, blank=True)
    concurrency_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="At most this many jobs of concurrency_key run at once."
    )
    rate_key = models.CharField(max_length=200, null=True, blank=True)
    rate_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="At most this many starts of rate_key per rate_period."
    )
    rate_period = models.PositiveIntegerField(
        null=True, blank=True, help_text="Seconds: the rate limit's window."
    )
    # Fair ordering (docs/fairness.md): the enqueue writes the job's place in line into fair_at
    # and run_at, so the claim, which reads run_at alone, is unchanged.
    fair_key = models.CharField(max_length=200, null=True, blank=True)
    fair_weight = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="The key's share of the queue against weight-1 keys."
    )
    fair_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="The place in line the enqueue gave the job among its key's (its run_at then).",
    )
    task_backend = models.CharField(
        max_length=100,
        blank=True,
        default="",
        help_text="The TASKS alias of a django.tasks task enqueued through the tasks backend; "
        "empty for @job functions. Only marked rows are resolved by import path, and only to a "
        "Task instance.",
    )

    # The workflow step this job runs (docs/workflows.md); NULL for a job enqueued alone. Its
    # finish also moves the step and releases its dependants, in the same transaction.
    # Neither indexed nor constrained: a job is found from its step (``WorkflowStep.job``).
    workflow_step = models.ForeignKey(
        "WorkflowStep",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="jobs",
        editable=False,
    )
    # The W3C context (traceparent, tracestate) of the enqueue's send span, when OpenTelemetry
    # recorded it (core/tracing.py): every attempt's process span relates to it, after retries,
    # snoozes and deferrals (the same row) and a replay (which copies it). NULL otherwise. A
    # workflow step's job, which no send span enqueued, keeps there instead (under "process")
    # its last attempt's process span, for its children's spans to link to
    # (protocol/step_traces.py).
    trace_context = models.JSONField(
        null=True,
        blank=True,
        editable=False,
        help_text="The enqueue's trace context (traceparent, tracestate), for the job's spans.",
    )

    class Meta:
        ordering = ["-id"]
        indexes = job_indexes.INDEXES
        constraints = job_indexes.CONSTRAINTS
        permissions = [
            ("cancel_job", "Can cancel a job"),
            ("run_job_now", "Can run a job now or retry it"),
            ("pause_queue", "Can pause and resume queues and job names"),
        ]

    def __str__(self) -> str:
        return f"{self.name}#{self.pk} ({self.status})"

    @property
    def replayed_by(self) -> Job | None:
        """The job an operator's replay of this dead job created; ``None`` when it was not
        replayed (or is not dead). The dead job itself never runs again."""
        from .dead_letters import DeadLetter

        try:
            return self.dead_letter.replayed_job
        except DeadLetter.DoesNotExist:
            return None

    @property
    def replayed_from(self) -> Job | None:
        """The dead job this job is a replay of (its dead letter is ``replay_of``); ``None``
        for a job enqueued as usual."""
        from .dead_letters import DeadLetter

        try:
            return self.replay_of.job
        except DeadLetter.DoesNotExist:
            return None

    def wait(self, timeout: float | dt.timedelta | None = None) -> Any:
        """Block until the job finishes, refresh this instance, and return its ``result``.

        ``timeout`` (seconds or a ``timedelta``; ``None``: no limit) passing first raises
        ``TimeoutError``; a job that ended ``dead`` or ``cancelled`` raises
        ``JobFailedError`` (its ``status``, ``error`` and ``replayed_by``). Refused inside
        ``transaction.atomic()`` unless the job has already finished (docs/results.md).
        """
        from .results import wait

        return wait(self, timeout)

    async def await_result(self, timeout: float | dt.timedelta | None = None) -> Any:
        """``wait()`` for async code: the event loop is never blocked."""
        from .results import await_result

        return await await_result(self, timeout)

    def logs(self) -> list[dict[str, Any]]:
        """What the job's attempts emitted through ``logging`` (``LEASEJOBS_JOB_LOGS``), oldest
        first: ``{"attempt", "level", "logger", "message", "at"}`` each, and ``{"attempt",
        "dropped"}`` where the caps dropped records (docs/observability.md)."""
        rows = self.log_records.using(self._state.db).order_by("attempt", "id")
        return [
            {"attempt": attempt, **record}
            for attempt, records in rows.values_list("attempt", "records")
            for record in records
        ]

    @property
    def attempts_charged(self) -> int:
        """Claims that count against ``max_attempts``."""
        return self.attempt - self.released
