"""Deleting limiter rows nothing needs any more, in short batches taken in key order.

A limiter row is kept by nothing but the claims of its key: a rate row (``r:``) holds the
starts of its current window only, and a concurrency row (``c:``) is only something to lock.
So a rate row whose window began before a cutoff at least one period ago says no more than
no row at all, and a concurrency row of a key with no running job can go too: the next claim
of the key creates it again.

What must never happen is deleting a row a claimer holds locked: that claimer would write its
starts into no row, and the next claim of the window would start the key's limit again. So a
batch locks its rows the way claimers lock them, skipping any row a claimer holds (MariaDB and
MySQL: ``FOR UPDATE SKIP LOCKED`` on the rows; PostgreSQL: the key's transaction-level
advisory lock; SQLite: its single write lock, taken by the DELETE itself), and the DELETE
repeats the conditions, so a row a claim refilled between the read and the DELETE stays.
"""

from __future__ import annotations

import datetime as dt

from django.db import connections, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.expressions import ExpressionWrapper, Value
from django.db.models.fields import DateTimeField

from ..dbtime import DbNow
from ..models import Job, Limiter, Status


def prunable(alias: str, older_than: dt.timedelta) -> QuerySet[Limiter]:
    """Rate rows whose window began before now - ``older_than`` (or never began), and
    concurrency rows of keys with no running job."""
    cutoff = ExpressionWrapper(DbNow() - Value(older_than), output_field=DateTimeField())
    running = Job.objects.using(alias).filter(
        status=Status.RUNNING, concurrency_key=OuterRef("name")
    )
    spent = Q(key__startswith="r:") & (Q(window_start__isnull=True) | Q(window_start__lt=cutoff))
    idle = Q(key__startswith="c:") & ~Exists(running)
    return Limiter.objects.using(alias).filter(spent | idle)


class LimiterPruning:
    """The ORM's way: rows locked ``FOR UPDATE SKIP LOCKED`` where the database can."""

    def prune_limiters(
        self, alias: str, older_than: dt.timedelta, batch: int, after_key: str
    ) -> tuple[int, str]:
        """Delete one batch of prunable limiter rows after ``after_key``; return (rows
        deleted, last key looked at)."""
        with transaction.atomic(using=alias):
            chosen = prunable(alias, older_than).filter(key__gt=after_key).order_by("key")
            if connections[alias].features.has_select_for_update_skip_locked:
                chosen = chosen.select_for_update(skip_locked=True)
            keys = list(chosen.values_list("key", flat=True)[:batch])
            if not keys:
                return 0, after_key
            deleted, _ = prunable(alias, older_than).filter(key__in=keys).delete()
        return deleted, keys[-1]


# The lock must be the one claimers take (postgresql_limited.LOCK_LIMITERS): the same function
# of the same text, the limiter row's key.
PG_LOCK_KEYS = """
SELECT k, pg_try_advisory_xact_lock(hashtextextended(k, 0)) FROM unnest(%s::text[]) AS k
"""


def prune_limiters_postgresql(
    alias: str, older_than: dt.timedelta, batch: int, after_key: str
) -> tuple[int, str]:
    """PostgreSQL locks keys with advisory locks, not rows: take the key's lock, then delete."""
    with transaction.atomic(using=alias):
        chosen = prunable(alias, older_than).filter(key__gt=after_key).order_by("key")
        keys = list(chosen.values_list("key", flat=True)[:batch])
        if not keys:
            return 0, after_key
        with connections[alias].cursor() as cursor:
            cursor.execute(PG_LOCK_KEYS, [keys])
            locked = [key for key, got in cursor.fetchall() if got]
        deleted = 0
        if locked:
            deleted, _ = prunable(alias, older_than).filter(key__in=locked).delete()
    return deleted, keys[-1]
