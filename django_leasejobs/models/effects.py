"""Recorded effects: what a job's handler did, kept so that a repeated run skips it.

Written in the handler's own transaction (``ctx.effect``); it outlives its job, whose pruning
sets its ``job`` to NULL, since the key must keep stopping repeats.
"""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now

from .jobs import Job


class Effect(models.Model):
    """A side effect recorded as done, in the same transaction as the handler's writes.

    The unique key makes a second run of an at-least-once job skip what the first run committed.
    """

    key = models.CharField(max_length=255, unique=True)
    job = models.ForeignKey(
        Job, null=True, blank=True, on_delete=models.SET_NULL, db_constraint=False
    )
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.key
