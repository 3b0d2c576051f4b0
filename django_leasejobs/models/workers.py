"""The table of live workers: one row per ``runjobworker`` process, written by its heartbeat."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class Worker(models.Model):
    """A worker process as its heartbeat last described it.

    Written only by :mod:`django_leasejobs.upkeep.workers`: one upsert per heartbeat beat
    (never per job), deleted at a clean stop, and pruned when not seen for a long time (a
    killed worker leaves its row behind). Times are the database's. Informational: no job's
    state depends on these rows, so a missing or late row never changes what runs.
    """

    worker_id = models.CharField(max_length=200, unique=True)
    host = models.CharField(max_length=255, blank=True, default="")
    pid = models.PositiveIntegerField(default=0)
    queues = models.CharField(
        max_length=2000, blank=True, default="*", help_text="Comma-separated; * for every queue."
    )
    version = models.CharField(max_length=50, blank=True, default="")
    concurrency = models.PositiveIntegerField(default=0, help_text="Threads for sync handlers.")
    async_concurrency = models.PositiveIntegerField(
        default=0, help_text="Async handlers at once (0: this process runs none)."
    )
    lease_seconds = models.FloatField(
        default=0.0, help_text="Its lease: a row not seen for this long belongs to a lost worker."
    )
    running = models.PositiveIntegerField(
        default=0, help_text="Jobs it held (claimed, not yet finished) at its last beat."
    )
    stuck = models.PositiveIntegerField(
        default=0,
        help_text="Threads still running a handler whose attempt the worker already ended "
        "(timeout or cancel) at its last beat.",
    )
    started_at = models.DateTimeField(db_default=Now())
    last_seen_at = models.DateTimeField(db_default=Now())

    class Meta:
        ordering = ["worker_id"]
        indexes = [
            # Pruning reads rows by age, and the stats read the live ones.
            models.Index(fields=["last_seen_at"], name="leasejobs_worker_seen"),
        ]

    def __str__(self) -> str:
        return self.worker_id
