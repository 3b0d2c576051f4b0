"""Dead letters: jobs that will not run again by themselves, kept for an operator.

A dead job keeps its row in the jobs table; its dead letter holds what an operator needs to
decide (the reason, the attempts' errors, the error's fingerprint for grouping) and records a
replay, once, as the new job it created.
"""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now

from .jobs import Job


class DeadLetter(models.Model):
    """A job that will not run again by itself, kept for an operator to inspect and replay."""

    # No database constraint: on PostgreSQL the job table is partitioned (docs/operations.md).
    job = models.OneToOneField(
        Job, on_delete=models.CASCADE, related_name="dead_letter", db_constraint=False
    )
    name = models.CharField(max_length=200)
    args = models.JSONField(default=list, blank=True)
    kwargs = models.JSONField(default=dict, blank=True)
    queue = models.CharField(max_length=100)
    reason = models.CharField(max_length=200)
    errors = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(db_default=Now(), db_index=True)
    replayed_job = models.OneToOneField(
        Job,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        db_constraint=False,
        related_name="replay_of",
        help_text="The job a replay created; set once, so replaying twice creates one job.",
    )
    replayed_at = models.DateTimeField(null=True, blank=True)
    fingerprint = models.CharField(
        max_length=32,
        blank=True,
        default="",
        editable=False,
        help_text="The error's key: its exception class and the handler's innermost frames "
        "(django_leasejobs.fingerprints); empty until computed for a row written before it.",
    )

    class Meta:
        ordering = ["-id"]
        indexes = [
            # The grouped page reads (fingerprint, name, created_at) in index order, and a
            # group's replay or discard finds its rows by the leading column.
            models.Index(
                fields=["fingerprint", "name", "created_at"], name="leasejobs_deadletter_groups"
            ),
        ]
        permissions = [
            ("replay_deadletter", "Can replay a dead letter"),
            ("replay_deadletter_group", "Can replay a group of dead letters"),
            ("discard_deadletter_group", "Can discard a group of dead letters"),
        ]

    def __str__(self) -> str:
        return f"dead {self.name}#{self.job_id}: {self.reason}"
