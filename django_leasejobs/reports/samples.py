"""The dashboard's history: once a minute, one row per queue, written by any worker.

Every worker's maintenance calls :meth:`Sampler.tick`; shortly after each minute of its clock
it asks the database for the time and, unless a row of the minute just ended exists already,
reads that minute's numbers and inserts them. The unique (minute, queue) key makes the insert
an insert-or-ignore, so when two workers get there at once each (minute, queue) still gets one
row, with no leader to elect or lose. A worker's jitter spreads the tries, so usually the first
writes and the others find its rows with one indexed look-up.

The finished counts read only the minute's rows, through the indexes on
(status, finished_at) and on retried_at; the depth numbers are :func:`.stats.collect`'s.
Minutes nobody sampled (no worker ran) stay missing: the charts show them as gaps.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from django.db import Error as DatabaseError
from django.db.models import Count, DurationField, ExpressionWrapper, F, Q

from ..db import dbtime
from ..models import IS_FINAL, RUN_TIME_EDGES, Job, QueueSample, Status
from ..models.databases import job_database
from . import stats

logger = logging.getLogger("django_leasejobs")

MINUTE = dt.timedelta(minutes=1)
JITTER = 5.0
"""Seconds after a minute's start within which a worker tries, chosen at random per try."""


def _alias() -> str:
    return job_database()


def write_sample() -> dt.datetime | None:
    """Sample the last whole minute of database time unless some worker did; return that
    minute, or None when it was sampled already."""
    alias = _alias()
    now = dbtime.db_now(alias)
    minute = now.replace(second=0, microsecond=0) - MINUTE
    if QueueSample.objects.using(alias).filter(minute=minute).exists():
        return None
    sample_minute(minute)
    return minute


def sample_minute(minute: dt.datetime) -> int:
    """Read the numbers of the minute starting at ``minute`` and insert them, ignoring the rows
    another worker wrote first; return how many rows were offered."""
    alias = _alias()
    rows: dict[str, QueueSample] = {}

    def row(queue: str) -> QueueSample:
        return rows.setdefault(queue, QueueSample(minute=minute, queue=queue))

    for queue, numbers in stats.collect(using=alias).queues.items():
        sample = row(queue)
        sample.due, sample.running = numbers.due, numbers.running
        sample.oldest_due_age = numbers.oldest_due_age
    _add_finished(row, alias, minute)
    _add_retried(row, alias, minute)
    QueueSample.objects.using(alias).bulk_create(rows.values(), ignore_conflicts=True)
    return len(rows)


def _add_finished(row: Callable[[str], QueueSample], alias: str, minute: dt.datetime) -> None:
    """Succeeded and dead jobs of the minute, by queue, with their run-time histogram."""
    run_time = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    histogram: dict[str, Any] = {
        name: Count("id", filter=Q(run_time__lte=dt.timedelta(seconds=edge)))
        for name, edge in RUN_TIME_EDGES
    }
    # Typed loosely: the histogram's columns are annotated from RUN_TIME_EDGES.
    finished: Any = (
        Job.objects.using(alias)
        .filter(
            IS_FINAL,  # leasejobs_finished's condition, for SQLite
            status__in=[Status.SUCCEEDED, Status.DEAD],
            finished_at__gte=minute,
            finished_at__lt=minute + MINUTE,
        )
        .alias(run_time=run_time)
        .order_by()
        .values("queue", "status")
        .annotate(count=Count("id"), runs=Count("id", filter=Q(started_at__isnull=False)))
        .annotate(**histogram)
    )
    for counts in finished:
        sample = row(counts["queue"])
        if counts["status"] == Status.SUCCEEDED:
            sample.succeeded += counts["count"]
        else:
            sample.dead += counts["count"]
        sample.runs += counts["runs"]
        for name, _ in RUN_TIME_EDGES:
            setattr(sample, name, getattr(sample, name) + counts[name])


def _add_retried(row: Callable[[str], QueueSample], alias: str, minute: dt.datetime) -> None:
    retried = (
        Job.objects.using(alias)
        .filter(retried_at__gte=minute, retried_at__lt=minute + MINUTE)
        .order_by()
        .values("queue")
        .annotate(count=Count("id"))
    )
    for counts in retried:
        row(counts["queue"]).retried += counts["count"]


class Sampler:
    """When a worker's maintenance next tries :func:`write_sample`: once per minute of the
    worker's clock, a few random seconds after the minute starts.

    The worker's clock only picks the moment to look; the minute sampled is the database's.
    A clock that is off just makes this worker look later in the database's minute.
    """

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        jitter: Callable[[], float] = lambda: random.uniform(1.0, JITTER),
    ) -> None:
        self._clock = clock
        self._jitter = jitter
        self._next = self._after_next_minute()

    def _after_next_minute(self) -> float:
        now = self._clock()
        return now - now % 60 + 60 + self._jitter()

    def tick(self) -> dt.datetime | None:
        """Try when the time has come; return the minute this worker sampled, if it did."""
        if self._clock() < self._next:
            return None
        self._next = self._after_next_minute()
        try:
            return write_sample()
        except DatabaseError:
            raise  # the worker waits the outage out, as for any maintenance statement
        except Exception:  # the charts' history must never stop a worker running jobs
            logger.exception("worker.sample_error")
            return None
