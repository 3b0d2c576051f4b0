"""Rows that test jobs write, so tests can see what handlers did (and how often)."""

from django.db import models


class Hit(models.Model):
    """One handler run: which job, which attempt, and a free-form label."""

    job_id = models.BigIntegerField(null=True)
    attempt = models.PositiveIntegerField(default=0)
    label = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"hit {self.label} job={self.job_id} attempt={self.attempt}"
