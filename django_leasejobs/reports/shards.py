"""The operators' numbers and verdicts over every queue database, each read on its own.

With ``LEASEJOBS_QUEUE_DATABASES`` a project's jobs live in several databases, and a stalled
queue in any of them must fail ``checkjobs`` and the health view, and show in ``jobstats``. Each
database has its own clock, workers (a worker serves one database, and its row is written
there), pauses and dead letters, so each is read and judged on its own numbers, never summed
into one ``Stats``: a worker of the home database serves no queue of a shard, and summing would
hide that. A database that cannot be read is a problem naming it, and the others are still
read: one broken shard must not blind the operator to the rest.

The rule of each database is the home one's: a verdict reads the primary
(``probe_database``), the numbers shown read its replica when ``LEASEJOBS_READ_DATABASES``
gives one (``read_database``). Both are asked inside :func:`working_on`, so they answer for
that database. The home database is read outside any ``using_database`` block, exactly as
with one database: a project's own replica router keeps its choice there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from django.db import DatabaseError

from ..models.databases import (
    home_database,
    probe_database,
    queue_database,
    queue_databases,
    read_database,
    using_database,
)
from . import replica_lag, stats
from .health import UNREADABLE, Problem, Thresholds, evaluate


@dataclass
class Reading:
    """One queue database's numbers (``stats``), or why it could not be read (``error``);
    ``lag`` is its replica's, when the numbers were read there."""

    database: str
    stats: stats.Stats | None
    error: DatabaseError | None = None
    lag: replica_lag.ReplicaLag | None = None
    source: str = ""
    """The alias the numbers were read from (the database, or its replica)."""


@contextlib.contextmanager
def working_on(alias: str) -> Iterator[None]:
    """Inside the block the library works on the queue database ``alias``; the home one is
    left as it is with one database (its reads keep to the routers' choice)."""
    with using_database(None if alias == home_database() else alias):
        yield


def read_each(*, probe: bool, counts: bool = True, lag: bool = True) -> list[Reading]:
    """Every queue database's numbers, the home one first: on the primary for a verdict
    (``probe``), else where the read side reads, with the replica's lag (unless ``lag`` is
    false: the metrics' gauges need none). ``counts`` as in :func:`stats.collect`."""
    found = []
    for alias in queue_databases():
        with working_on(alias):
            where = probe_database() if probe else read_database()
            try:
                result = stats.collect(using=where, counts=counts)
            except DatabaseError as exc:
                found.append(Reading(alias, None, error=exc, source=where))
                continue
            behind = replica_lag.read() if lag and not probe else None
            found.append(Reading(alias, result, lag=behind, source=where))
    return found


def merged_queues(readings: Iterable[Reading]) -> dict[str, stats.QueueStats]:
    """One entry per queue over every readable database (home first): the database the
    queue routes to wins (``LEASEJOBS_QUEUES`` lists a declared queue, with zeros, in every
    database); a queue found only elsewhere (jobs enqueued before a route changed) is kept
    from where it is. The metrics' gauges are labelled by queue alone."""
    merged: dict[str, stats.QueueStats] = {}
    for reading in readings:
        if reading.stats is None:
            continue
        for queue, numbers in reading.stats.queues.items():
            if queue not in merged or queue_database(queue) == reading.database:
                merged[queue] = numbers
    return merged


def judge(
    readings: list[Reading], thresholds: Thresholds, queues: Iterable[str] | None = None
) -> list[Problem]:
    """Every threshold passed in every database (``health.evaluate`` on each one's numbers),
    and every database that could not be read. With several databases each problem names its
    own; with one, none does (the verdict reads as before shards)."""
    several = len(readings) > 1
    names = None if queues is None else set(queues)
    problems: list[Problem] = []
    for reading in readings:
        database = reading.database if several else ""
        if reading.stats is None:
            problems.append(Problem("", UNREADABLE, 0, 0, database=database))
            continue
        for problem in evaluate(reading.stats, thresholds, names):
            problems.append(replace(problem, database=database))
    return problems


def total(readings: Iterable[Reading]) -> stats.QueueStats:
    """Every readable database's total, added up (the largest oldest due age)."""
    summed = stats.QueueStats()
    for reading in readings:
        if reading.stats is not None:
            summed.add(reading.stats.total)
    return summed
