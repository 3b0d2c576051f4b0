"""API tokens issued and revoked: a random secret shown once, its SHA-256 kept.

Rows of the token table written by the admin, ``jobapitoken`` and tests; the API's
authentication (:mod:`django_leasejobs.api.tokens`) looks a secret up by the same digest.

The secret carries 256 bits of randomness, so a plain SHA-256 (not a slow password hash) is
enough: nobody can guess a secret whose digest they read, and a request pays one hash. The
row is found by its digest through the unique index, then the digests are compared with
``hmac.compare_digest`` so the comparison itself takes the same time whatever matches.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from typing import Any

from ..db.dbtime import DbNow, db_now
from ..models import ApiToken
from ..models.databases import token_database

SECRET_PREFIX = "ljt_"
"""Marks a secret as ours, so a secret scanner (or a person) can tell what leaked."""


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def prefix_of(secret: str) -> str:
    """What is kept of the secret in clear: enough to tell tokens apart, too little to use."""
    return secret[: len(SECRET_PREFIX) + 6]


def issue(
    user: Any, *, name: str = "", expires_in: dt.timedelta | None = None
) -> tuple[ApiToken, str]:
    """Make a token for ``user``; return it and its secret (which is stored nowhere)."""
    if expires_in is not None and expires_in <= dt.timedelta(0):
        raise ValueError(f"A token's lifetime must be positive, not {expires_in}.")
    secret = new_secret()
    token = ApiToken.objects.create(
        user=user,
        name=name,
        digest=digest(secret),
        prefix=prefix_of(secret),
        expires_at=None if expires_in is None else db_now(token_database()) + expires_in,
    )
    return token, secret


def revoke(token_id: int) -> bool:
    """Revoke a token for good; False when there is no such token or it was revoked before."""
    return bool(
        ApiToken.objects.filter(pk=token_id, revoked_at__isnull=True).update(revoked_at=DbNow())
    )
