"""Runtime statistics: one row per job name and hour, counters that workers add to.

The lease advisor (``jobstats --leases``, the admin's lease page, the ``W005``/``W006``
checks) reads these rows. Workers never write one per job: each counts its runs in memory
and adds them here at most once per heartbeat (:mod:`django_leasejobs.upkeep.runtime_stats`),
so the hot path stays one statement per claim and per report.
"""

from __future__ import annotations

from django.db import models

from ..core.histogram import field_names


class RuntimeStat(models.Model):
    """What the workers saw of one job name in one hour (database time).

    ``h00``..``h47`` count handler runtimes in the log-spaced buckets of
    :mod:`django_leasejobs.core.histogram`; rows of several hours merge by adding them.
    ``stale`` counts reports refused because the attempt's lease was lost while its worker was
    alive; ``recovered`` counts leases that expired and were taken back by lease recovery (a
    worker died or stalled). ``lease_seconds`` and ``heartbeat_seconds`` are the newest flush's.
    """

    name = models.CharField(max_length=200, help_text="Registered dotted path.")
    hour = models.DateTimeField(help_text="Start of the hour, database time.")
    runs = models.BigIntegerField(default=0)
    seconds = models.FloatField(default=0.0, help_text="Sum of the runtimes.")
    max_seconds = models.FloatField(default=0.0)
    stale = models.BigIntegerField(default=0)
    recovered = models.BigIntegerField(default=0)
    lease_seconds = models.FloatField(null=True, blank=True)
    heartbeat_seconds = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["name", "hour"]
        constraints = [
            models.UniqueConstraint(fields=["name", "hour"], name="leasejobs_one_runtime_hour"),
        ]
        indexes = [models.Index(fields=["hour"], name="leasejobs_runtime_hour")]

    def __str__(self) -> str:
        return f"{self.name} at {self.hour:%Y-%m-%d %H}:00"

    def histogram(self) -> list[int]:
        return [getattr(self, field) for field in field_names()]


for _field in field_names():
    # A counter column per bucket: adding counts is then plain ``col = col + %s`` on every
    # database, which a JSON list cannot do.
    RuntimeStat.add_to_class(_field, models.BigIntegerField(default=0))
del _field
