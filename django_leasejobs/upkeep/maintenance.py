"""Maintenance leases: one worker at a time does a kind of maintenance work (retention).

A lease on a row, not a leader election: :func:`take_lease` is one guarded UPDATE that gives
the row to the caller when it is free, expired (database time) or already the caller's, and
"zero rows changed" means someone else holds it. The holder renews by taking it again; when it
stops or dies, expiry passes the lease on. Nothing here touches a job: the work a lease
guards must be safe if two workers ever did it at once (a holder paused past its lease), and
the lease only keeps its load to one worker.
"""

from __future__ import annotations

import datetime as dt

from django.db.models import Q
from django.db.models.expressions import ExpressionWrapper, Value
from django.db.models.fields import DateTimeField

from ..db.dbtime import DbNow
from ..models import MaintenanceLease
from ..protocol.base import job_database, logger

RETENTION = "retention"
"""The lease of pruning by ``LEASEJOBS_RETENTION``."""


def _check(name: str, holder: str, seconds: float) -> None:
    if not isinstance(name, str) or not name or len(name) > 100:
        raise ValueError(f"name must be a non-empty string of at most 100 characters: {name!r}")
    if not isinstance(holder, str) or not holder or len(holder) > 200:
        raise ValueError(f"holder must be a non-empty string of at most 200 characters: {holder!r}")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise ValueError(f"seconds must be a positive number, not {seconds!r}.")


def take_lease(name: str, holder: str, seconds: float) -> bool:
    """Take (or renew) the lease ``name`` for ``seconds`` of database time; True if taken.

    One guarded UPDATE: ``expires_at = now + seconds`` where the lease is free, expired or
    already ``holder``'s. False (nothing written) when another holder's lease runs. The row is
    created, free, the first time a name is asked for (insert-or-ignore on the unique name, so
    racing workers create one row and the UPDATE decides between them).
    """
    _check(name, holder, seconds)
    alias = job_database()
    expires = ExpressionWrapper(
        DbNow() + Value(dt.timedelta(seconds=seconds)), output_field=DateTimeField()
    )
    free = Q(expires_at__isnull=True) | Q(expires_at__lte=DbNow()) | Q(holder=holder)
    rows = MaintenanceLease.objects.using(alias).filter(free, name=name)
    taken = rows.update(holder=holder, expires_at=expires)
    if not taken and not MaintenanceLease.objects.using(alias).filter(name=name).exists():
        MaintenanceLease.objects.using(alias).bulk_create(
            [MaintenanceLease(name=name)], ignore_conflicts=True
        )
        taken = rows.update(holder=holder, expires_at=expires)
    if taken:
        logger.debug("maintenance.lease name=%s holder=%s seconds=%g", name, holder, seconds)
    return bool(taken)


def give_up_lease(name: str, holder: str) -> bool:
    """Give up the lease now if ``holder`` still has it (a clean stop); True if it did."""
    _check(name, holder, 1)
    alias = job_database()
    return bool(
        MaintenanceLease.objects.using(alias)
        .filter(name=name, holder=holder, expires_at__gt=DbNow())
        .update(expires_at=DbNow())
    )
