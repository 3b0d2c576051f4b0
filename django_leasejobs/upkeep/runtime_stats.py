"""Adding a worker's runtime counts to the per-hour rows, and pruning old rows.

A worker keeps :class:`RuntimeCounts` per job name in memory and hands them here at most once
per heartbeat. Each name is one ``UPDATE ... SET runs = runs + %s, h07 = h07 + %s ...`` on its
(name, hour) row, an ``INSERT`` when the hour's row does not exist yet, and the ``UPDATE``
again when a racing worker inserted it first: counts add, so no flush is ever lost or counted
twice, on any database, with the counts always passed as parameters.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest

from ..core import histogram
from ..db import dbtime
from ..db.deadlocks import retry_deadlocks
from ..models import RuntimeStat
from ..protocol.base import job_database


@dataclass
class RuntimeCounts:
    """One job name's runs since the last flush (what a worker adds to its hour's row)."""

    runs: int = 0
    seconds: float = 0.0
    max_seconds: float = 0.0
    stale: int = 0
    recovered: int = 0
    lease_seconds: float | None = None
    buckets: list[int] = field(default_factory=lambda: [0] * histogram.BUCKETS)

    def run(self, seconds: float) -> None:
        self.runs += 1
        self.seconds += seconds
        self.max_seconds = max(self.max_seconds, seconds)
        self.buckets[histogram.index(seconds)] += 1

    def add(self, other: RuntimeCounts) -> None:
        """Fold older counts in (a flush that failed goes back into the tally); the newer
        lease wins."""
        self.runs += other.runs
        self.seconds += other.seconds
        self.max_seconds = max(self.max_seconds, other.max_seconds)
        self.stale += other.stale
        self.recovered += other.recovered
        self.lease_seconds = self.lease_seconds or other.lease_seconds
        histogram.merge(self.buckets, other.buckets)


def hour_of(moment: dt.datetime) -> dt.datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def record_runtimes(counts: dict[str, RuntimeCounts], *, heartbeat: float | None) -> None:
    """Add each name's counts to its row of the database's current hour.

    ``heartbeat`` is the flushing worker's renewal interval (``None``: nothing renewed these
    leases). Names are written in sorted order, each in its own short statement.
    """
    if not counts:
        return
    alias = job_database()
    hour = hour_of(dbtime.db_now(alias))
    for name in sorted(counts):
        _add(alias, name, hour, counts[name], heartbeat)


@retry_deadlocks
def _add(
    alias: str, name: str, hour: dt.datetime, counts: RuntimeCounts, heartbeat: float | None
) -> None:
    rows = RuntimeStat.objects.using(alias).filter(name=name, hour=hour)
    changes = _increments(counts, heartbeat)
    if rows.update(**changes):
        return
    try:
        with transaction.atomic(using=alias):
            RuntimeStat.objects.using(alias).create(
                name=name, hour=hour, **_initial(counts, heartbeat)
            )
        return
    except IntegrityError:
        pass  # another worker created the hour's row first: add to it
    rows.update(**changes)


def _increments(counts: RuntimeCounts, heartbeat: float | None) -> dict[str, Any]:
    changes: dict[str, Any] = {
        "runs": F("runs") + counts.runs,
        "seconds": F("seconds") + counts.seconds,
        "max_seconds": Greatest(F("max_seconds"), Value(counts.max_seconds)),
        "stale": F("stale") + counts.stale,
        "recovered": F("recovered") + counts.recovered,
        "heartbeat_seconds": heartbeat,
    }
    if counts.lease_seconds is not None:
        changes["lease_seconds"] = counts.lease_seconds
    for column, count in zip(histogram.field_names(), counts.buckets, strict=True):
        if count:
            changes[column] = F(column) + count
    return changes


def _initial(counts: RuntimeCounts, heartbeat: float | None) -> dict[str, Any]:
    values: dict[str, Any] = {
        "runs": counts.runs,
        "seconds": counts.seconds,
        "max_seconds": counts.max_seconds,
        "stale": counts.stale,
        "recovered": counts.recovered,
        "lease_seconds": counts.lease_seconds,
        "heartbeat_seconds": heartbeat,
    }
    values.update(zip(histogram.field_names(), counts.buckets, strict=True))
    return values


def prune_runtime_stats(older_than: dt.timedelta, *, dry_run: bool = False) -> int:
    """Delete the hours that ended more than ``older_than`` ago; return how many rows went
    (would go, with ``dry_run``). A small table: one statement."""
    alias = job_database()
    cutoff = hour_of(dbtime.db_now(alias) - older_than)
    old = RuntimeStat.objects.using(alias).filter(hour__lt=cutoff)
    if dry_run:
        return old.count()
    deleted, _ = old.delete()
    return deleted
