"""API tokens for the HTTP API: the secret's hash, its user, expiry and last use."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.functions import Now


class ApiToken(models.Model):
    """A bearer token for the HTTP API, acting as its user with that user's permissions.

    Only the SHA-256 of the secret is kept: the secret is shown once, when the token is made
    (``manage.py jobapitoken create`` or the admin), and a leaked table grants nothing.
    """

    name = models.CharField(max_length=200, blank=True, default="", help_text="What it is for.")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="leasejobs_api_tokens"
    )
    digest = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(
        max_length=16, editable=False, help_text="The secret's first characters, to recognise it."
    )
    created_at = models.DateTimeField(db_default=Now())
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: never expires.")
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-id"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}\u2026 ({self.name or self.user})"
