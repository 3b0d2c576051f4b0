"""Flow control's tables: pauses the claim consults, and limiter rows (locks, rate buckets)."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class PauseKind(models.TextChoices):
    """What a pause names."""

    QUEUE = "queue", "Queue"
    JOB = "job", "Job name"


class Pause(models.Model):
    """A queue or a job name whose due jobs no worker claims while this row exists.

    Written and deleted only by :mod:`django_leasejobs.protocol.pauses`; every dialect's claim
    excludes what these rows name, in the claim's own statement, so a claim that starts after a
    pause commits never starts a job it names. Jobs already running finish.
    """

    kind = models.CharField(max_length=8, choices=PauseKind.choices)
    name = models.CharField(max_length=200, help_text="The queue or the registered job name.")
    paused_at = models.DateTimeField(db_default=Now())
    paused_by = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        ordering = ["kind", "name"]
        constraints = [
            # Also the index the claim reads: (kind, name) lookups never touch the table.
            models.UniqueConstraint(fields=["kind", "name"], name="leasejobs_one_pause"),
            models.CheckConstraint(
                condition=models.Q(kind__in=[k.value for k in PauseKind]),
                name="leasejobs_pause_kind_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.name} paused"


class Limiter(models.Model):
    """One limiter key: the row a claim locks to take its key's slots, and a rate bucket.

    ``key`` is ``c:`` plus a concurrency key or ``r:`` plus a rate key. Claimers lock the rows
    of the keys they want and skip those another claimer holds, so counting a key's running
    jobs and starting more of them happen one claimer at a time. A rate key counts ``started``
    jobs in the window beginning at ``window_start``; a claim in a later window starts it anew.
    """

    key = models.CharField(max_length=210, primary_key=True)
    name = models.CharField(max_length=200, help_text="The key as jobs carry it.")
    window_start = models.DateTimeField(null=True, blank=True)
    started = models.PositiveIntegerField(default=0, help_text="Starts in this window.")
    blocked_until = models.DateTimeField(
        null=True, blank=True, help_text="The window's end, once its starts reached the limit."
    )

    class Meta:
        indexes = [
            # Claims leave out the backlog of spent rate keys: they read only these rows.
            models.Index(
                fields=["blocked_until"],
                name="leasejobs_limiter_blocked",
                condition=models.Q(blocked_until__isnull=False),
            )
        ]

    def __str__(self) -> str:
        return self.key
