"""Leases on maintenance work that one worker at a time should do (pruning by retention).

Not a leader election: a row per kind of work, taken by a guarded UPDATE when it is free or
expired (database time), renewed by its holder while it works, and passed on by expiry when
the holder stops or dies. Two holders at once would only duplicate work that is safe to run
twice; the lease keeps the load of one.
"""

from __future__ import annotations

from django.db import models


class MaintenanceLease(models.Model):
    """Who holds one kind of maintenance work, until when (database time)."""

    name = models.CharField(max_length=100, unique=True, help_text="The work, e.g. retention.")
    holder = models.CharField(
        max_length=200, blank=True, default="", help_text="The worker id that took it last."
    )
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="Free once past (database time); empty: never taken."
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name}: {self.holder or 'free'}"
