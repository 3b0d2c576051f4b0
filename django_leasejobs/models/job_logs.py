"""``JobLog``: what one attempt of a job emitted through ``logging`` (``LEASEJOBS_JOB_LOGS``).

One row per attempt, beside the job rather than in it: a job's row is read and rewritten by
every claim, heartbeat and completion, and logs would make each of those heavier. ``records``
is the attempt's list, in order, each ``{"level", "logger", "message", "at"}``; where records
were dropped by the caps, one ``{"dropped": N}`` stands in their place. The foreign key has no
database constraint: the rows are written after the attempt's end, when the job may already
have been deleted, and pruning deletes them itself (``upkeep/pruning.py``); deleting a job
through the ORM deletes them too (``CASCADE`` is applied by Django).
"""

from __future__ import annotations

from django.db import models

from .jobs import Job


class JobLog(models.Model):
    job = models.ForeignKey(
        Job, on_delete=models.CASCADE, db_constraint=False, related_name="log_records"
    )
    attempt = models.PositiveIntegerField()
    records = models.JSONField(default=list)
    size = models.PositiveIntegerField(
        default=0, help_text="The records' size in bytes, counted against the job's cap."
    )

    class Meta:
        ordering = ["job", "attempt", "id"]

    def __str__(self) -> str:
        return f"logs of job {self.job_id} attempt {self.attempt}"
