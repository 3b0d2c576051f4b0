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
advisory lock; SQLite: its single write lock, taken by the DELETE itself). Where the rows are
locked the DELETE takes them by key; on SQLite it repeats the conditions, so a row a claim
refilled between the read and the DELETE stays.
``Dialect.prune_limiters`` is the ORM's batch; PostgreSQL's takes the keys' advisory locks.
"""

from __future__ import annotations

import datetime as dt

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.expressions import ExpressionWrapper, Value
from django.db.models.fields import DateTimeField

from ...db.dbtime import DbNow
from ...models import Job, Limiter, Status


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
