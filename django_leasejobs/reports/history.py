"""The dashboard's history: the per-minute samples of a range, summed into chart points.

A range is drawn with a fixed number of points: the last hour minute by minute, the last day
in 10-minute points, the last week in hours. The database does the summing (one grouped query
over the range's minutes, through the index that leads with the minute), so the page reads a
few hundred rows whatever the range. In a point of several minutes, the finished counts are an
average per minute, depth and oldest due age the peak, and the p95 run time comes from the
summed run-time histogram. A point no worker sampled is a gap (``None``), not a zero.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Max, QuerySet, Sum
from django.db.models.functions import ExtractMinute, Mod, TruncHour

from ..db import dbtime
from ..models import RUN_TIME_EDGES, QueueSample
from ..models.databases import read_database

UTC = dt.timezone.utc
MINUTE = dt.timedelta(minutes=1)


@dataclass(frozen=True)
class Range:
    """A chart range: its query value, its label, how long it is and minutes per point."""

    key: str
    label: str
    length: dt.timedelta
    step: int

    @property
    def points(self) -> int:
        return int(self.length / (self.step * MINUTE))


RANGES = {
    r.key: r
    for r in (
        Range("1h", "last hour", dt.timedelta(hours=1), 1),
        Range("24h", "last 24 hours", dt.timedelta(days=1), 10),
        Range("7d", "last 7 days", dt.timedelta(days=7), 60),
    )
}
DEFAULT_RANGE = RANGES["1h"]


@dataclass
class Point:
    """One chart point of one queue. ``sampled`` is how many of its minutes some worker
    sampled: 0 makes every number ``None`` (a gap)."""

    start: dt.datetime
    sampled: int = 0
    succeeded: float | None = None
    retried: float | None = None
    dead: float | None = None
    due: int | None = None
    running: int | None = None
    oldest_due_age: float | None = None
    p95_run_time: float | None = None


@dataclass
class History:
    """Every queue with a sample in the range, each with all of the range's points."""

    range: Range
    starts: list[dt.datetime] = field(default_factory=list)
    queues: dict[str, list[Point]] = field(default_factory=dict)


def p95(runs: int, within: list[int]) -> float | None:
    """The 95th percentile of ``runs`` run times from cumulative counts at ``RUN_TIME_EDGES``,
    interpolated inside its bucket; past the last edge it reads as the last edge."""
    if runs <= 0:
        return None
    rank = 0.95 * runs
    low_edge, low_count = 0.0, 0
    for (_, edge), count in zip(RUN_TIME_EDGES, within, strict=True):
        if count >= rank:
            share = (rank - low_count) / (count - low_count) if count > low_count else 1.0
            return low_edge + share * (edge - low_edge)
        low_edge, low_count = edge, count
    return RUN_TIME_EDGES[-1][1]


def collect(
    range_: Range = DEFAULT_RANGE, using: str | None = None, now: dt.datetime | None = None
) -> History:
    """Read ``range_`` of history, ending with the last whole minute before ``now`` (the
    database's time, read when not given: tests pass one they read, to pin the minute)."""
    alias = using or read_database()
    # In UTC: points are cut on UTC's minutes and hours, as the query cuts them.
    end = (now or dbtime.db_now(alias)).astimezone(UTC).replace(second=0, microsecond=0)
    last = _floor(end - MINUTE, range_.step)
    step = dt.timedelta(minutes=range_.step)
    starts = [last - step * i for i in reversed(range(range_.points))]
    samples = _bucketed(
        QueueSample.objects.using(alias).filter(minute__gte=starts[0], minute__lt=end),
        range_.step,
    )
    sampled = {
        _start(row): row["minutes"]
        for row in samples.order_by()
        .values("hour", "part")
        .annotate(minutes=Count("minute", distinct=True))
    }
    history = History(range=range_, starts=starts)
    position = {start: i for i, start in enumerate(starts)}
    for row in _sums(samples):
        if row["queue"] not in history.queues:
            history.queues[row["queue"]] = [Point(start) for start in starts]
        points = history.queues[row["queue"]]
        start = _start(row)
        points[position[start]] = _point(start, sampled[start], row)
    for points in history.queues.values():
        for index, start in enumerate(starts):
            if points[index].sampled == 0 and start in sampled:
                points[index] = _idle(start, sampled[start])
    history.queues = dict(sorted(history.queues.items()))
    return history


def _bucketed(samples: QuerySet[QueueSample], step: int) -> Any:
    """Each sample with its point: the hour (UTC) and the point's first minute in it."""
    minute = ExtractMinute("minute", tzinfo=UTC)
    return samples.annotate(hour=TruncHour("minute", tzinfo=UTC), part=minute - Mod(minute, step))


def _sums(samples: Any) -> Any:
    """Per queue and point: the finished counts and histogram summed, the depths' peaks."""
    histogram = {name: Sum(name) for name, _ in RUN_TIME_EDGES}
    return (
        samples.order_by()
        .values("queue", "hour", "part")
        .annotate(
            succeeded_sum=Sum("succeeded"),
            retried_sum=Sum("retried"),
            dead_sum=Sum("dead"),
            due_peak=Max("due"),
            running_peak=Max("running"),
            oldest_peak=Max("oldest_due_age"),
            runs_sum=Sum("runs"),
            **{f"{name}_sum": expression for name, expression in histogram.items()},
        )
    )


def _point(start: dt.datetime, minutes: int, row: dict[str, Any]) -> Point:
    return Point(
        start=start,
        sampled=minutes,
        succeeded=row["succeeded_sum"] / minutes,
        retried=row["retried_sum"] / minutes,
        dead=row["dead_sum"] / minutes,
        due=row["due_peak"],
        running=row["running_peak"],
        oldest_due_age=row["oldest_peak"],
        p95_run_time=p95(row["runs_sum"], [row[f"{name}_sum"] for name, _ in RUN_TIME_EDGES]),
    )


def _idle(start: dt.datetime, minutes: int) -> Point:
    """A point some worker sampled with no row for this queue: nothing was there to count."""
    return Point(start, minutes, 0.0, 0.0, 0.0, 0, 0, 0.0, None)


def _start(row: dict[str, Any]) -> dt.datetime:
    return dbtime.as_aware(row["hour"]) + dt.timedelta(minutes=int(row["part"]))


def _floor(instant: dt.datetime, step: int) -> dt.datetime:
    return instant.replace(minute=instant.minute - instant.minute % step)


__all__ = ["DEFAULT_RANGE", "RANGES", "History", "Point", "Range", "collect", "p95"]
