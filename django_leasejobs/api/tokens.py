"""API tokens: a request's bearer secret found by its SHA-256 digest (issued in
:mod:`django_leasejobs.upkeep.api_tokens`, which the admin and ``jobapitoken`` share).

The secret carries 256 bits of randomness, so a plain SHA-256 (not a slow password hash) is
enough: nobody can guess a secret whose digest they read, and a request pays one hash. The
row is found by its digest through the unique index, then the digests are compared with
``hmac.compare_digest`` so the comparison itself takes the same time whatever matches.
"""

from __future__ import annotations

import datetime as dt
import hmac
from typing import Any

from django.db.models import Q

from ..db.dbtime import DbNow
from ..models import ApiToken
from ..upkeep.api_tokens import digest
from .errors import ApiError

LAST_USED_EVERY = dt.timedelta(minutes=1)
"""``last_used_at`` is written at most this often per token: not one UPDATE per request."""


def user_for(secret: str) -> Any:
    """The active user a live token's secret stands for; ``ApiError`` (401) for anything else."""
    wanted = digest(secret)
    token = (
        ApiToken.objects.select_related("user")
        .annotate(db_now=DbNow())
        .filter(digest=wanted)
        .first()
    )
    if token is None or not hmac.compare_digest(token.digest, wanted):
        raise _invalid("The bearer token is not a token of this API.")
    if token.revoked_at is not None:
        raise _invalid(f"The bearer token {token.prefix}\u2026 was revoked.")
    now = token.db_now
    if token.expires_at is not None and token.expires_at <= now:
        raise _invalid(f"The bearer token {token.prefix}\u2026 expired.")
    if not token.user.is_active:
        raise _invalid(f"The bearer token {token.prefix}\u2026 belongs to an inactive user.")
    ApiToken.objects.filter(
        Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_EVERY), pk=token.pk
    ).update(last_used_at=DbNow())
    return token.user


def _invalid(message: str) -> ApiError:
    return ApiError(
        "invalid_token", message, headers={"WWW-Authenticate": 'Bearer error="invalid_token"'}
    )
