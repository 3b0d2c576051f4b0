"""Cron schedules and the occurrences an operator skipped."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.functions import Now

from ..core import cron as cron_module
from ..core import json_values, occurrences, registry, validation
from ..errors import JobValidationError


class Misfire(models.TextChoices):
    """What a scheduler does with occurrences missed while no scheduler ran."""

    ALL = occurrences.ALL, "Run every missed occurrence"
    LATEST = occurrences.LATEST, "Run only the latest missed occurrence"
    SKIP = occurrences.SKIP, "Skip missed occurrences"


class Schedule(models.Model):
    """A cron expression that emits one job per occurrence; the cursor survives pruning.

    ``last_occurrence_at`` is the authority on what has fired: every occurrence at or before it
    was emitted as a job or skipped by the misfire policy (see ``ScheduleSkip``). Schedulers only
    ever emit occurrences after it, moving it forward with a compare-and-set in the same
    transaction as the job's INSERT, so deleting old jobs can never make an occurrence fire again.
    """

    name = models.CharField(max_length=200, unique=True)
    cron = models.CharField(max_length=200)
    timezone = models.CharField(max_length=64, default="UTC")
    job = models.CharField(max_length=200, help_text="Registered job name (dotted path).")
    args = models.JSONField(default=list, blank=True)
    kwargs = models.JSONField(default=dict, blank=True)
    queue = models.CharField(max_length=100, blank=True, default="")
    priority = models.SmallIntegerField(null=True, blank=True)
    max_attempts = models.PositiveIntegerField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    jitter = models.PositiveIntegerField(default=0, help_text="Seconds of random delay.")
    misfire = models.CharField(max_length=8, choices=Misfire.choices, default=Misfire.LATEST)
    catchup_window = models.PositiveIntegerField(
        default=3600, help_text="Seconds: missed occurrences older than this are skipped."
    )
    last_occurrence_at = models.DateTimeField(
        null=True, blank=True, help_text="Cursor: the latest occurrence emitted or skipped."
    )
    from_settings = models.BooleanField(default=False, editable=False)
    from_code = models.BooleanField(
        default=False,
        editable=False,
        help_text="Declared by @job(cron=...): a sync by a process that does not register "
        "the job leaves it alone.",
    )
    synced_spec = models.JSONField(
        null=True,
        blank=True,
        editable=False,
        help_text="The LEASEJOBS_SCHEDULES entry or @job(cron=...) declaration last applied by "
        "a sync; admin edits stay until the declaration changes.",
    )
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def problems(self) -> dict[str, str]:
        """Field -> what is wrong with it, for the checks field types cannot express.

        Used by ``clean()`` (admin forms) and by the settings sync, so both refuse the same input.
        """
        found: dict[str, str] = {}
        try:
            cron_module.check_expression(self.cron)
        except cron_module.CronError as exc:
            found["cron"] = f"invalid cron expression {self.cron!r}: {exc}"
        try:
            cron_module.check_timezone(self.timezone)
        except cron_module.CronError as exc:
            found["timezone"] = str(exc)
        if not isinstance(self.job, str) or registry.lookup(self.job) is None:
            found["job"] = (
                f"no job is registered as {self.job!r} (decorate the function with @job in a "
                "jobs.py module of an installed app)"
            )
        checks: list[tuple[str, Any]] = [
            ("args", self._check_arguments),
            ("queue", lambda: self.queue and validation.check_queue(self.queue)),
            ("priority", lambda: self.priority is None or validation.check_priority(self.priority)),
            (
                "max_attempts",
                lambda: (
                    self.max_attempts is None or validation.check_max_attempts(self.max_attempts)
                ),
            ),
        ]
        for field, check in checks:
            try:
                check()
            except JobValidationError as exc:
                found[field] = str(exc)
        window = self.catchup_window
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            found["catchup_window"] = f"catchup_window must be at least 1 second, not {window!r}"
        return found

    def _check_arguments(self) -> None:
        """JSON arguments that the job's handler can be called with."""
        args, kwargs = json_values.check_payload(self.args, self.kwargs)
        spec = registry.lookup(self.job) if isinstance(self.job, str) else None
        if spec is not None:
            spec.check_arguments(args, kwargs)

    def clean(self) -> None:
        problems = self.problems()
        if problems:
            raise ValidationError(
                {
                    field: f"Schedule {self.name!r}: {message}."
                    for field, message in problems.items()
                }
            )


class ScheduleSkip(models.Model):
    """Occurrences a scheduler decided not to emit, so the admin can show them as gaps.

    One row per decision (not per occurrence), so a long outage costs one row: the skipped
    occurrences are those of the schedule's cron expression with ``after < t <= through``.
    """

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="skips")
    after = models.DateTimeField(help_text="Exclusive: the cursor before the skip.")
    through = models.DateTimeField(help_text="Inclusive: the last occurrence skipped.")
    count = models.PositiveIntegerField(
        null=True, blank=True, help_text="Occurrences skipped; empty when too many to count."
    )
    reason = models.CharField(max_length=200)
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        ordering = ["-through"]
        indexes = [models.Index(fields=["schedule", "through"], name="leasejobs_skip_through")]

    def __str__(self) -> str:
        return f"{self.schedule_id}: skipped ({self.after}, {self.through}]: {self.reason}"
