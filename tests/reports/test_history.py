"""The charts' history: samples summed into the points of the last hour, day and week, with
gaps where no worker sampled, and the p95 run time from the summed histogram.

Samples are written directly, at minutes counted back from a database time the test reads
once and hands to ``history.collect``, so no assertion depends on where in the minute it runs.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.test import override_settings

from django_leasejobs.db.dbtime import db_now
from django_leasejobs.models import RUN_TIME_EDGES, QueueSample
from django_leasejobs.reports import history

pytestmark = pytest.mark.django_db

MINUTE = dt.timedelta(minutes=1)
EDGES = [edge for _, edge in RUN_TIME_EDGES]


def write(minute: dt.datetime, queue: str = "default", **numbers: Any) -> None:
    QueueSample.objects.create(minute=minute, queue=queue, **numbers)


def run_times(*seconds: float) -> dict[str, int]:
    """The histogram columns of jobs that ran these many seconds."""
    counts = {name: sum(1 for s in seconds if s <= edge) for name, edge in RUN_TIME_EDGES}
    return {"runs": len(seconds), **counts}


@pytest.fixture
def now() -> dt.datetime:
    return db_now()


def current_minute(now: dt.datetime) -> dt.datetime:
    return now.replace(second=0, microsecond=0)


class TestP95:
    def within(self, *seconds: float) -> tuple[int, list[int]]:
        counts = run_times(*seconds)
        return counts["runs"], [counts[name] for name, _ in RUN_TIME_EDGES]

    def test_no_runs_have_no_p95(self) -> None:
        assert history.p95(0, [0] * len(EDGES)) is None

    def test_it_falls_inside_the_bucket_that_holds_the_95th_run(self) -> None:
        # 19 fast runs and one of 4 s: the 95th percentile is the 19th run, a fast one.
        fast = history.p95(*self.within(*[0.03] * 19, 4.0))
        assert fast is not None
        assert 0.025 < fast <= 0.05
        # 18 fast and two slow: the 19th run is slow.
        slow = history.p95(*self.within(*[0.03] * 18, 4.0, 4.0))
        assert slow is not None
        assert 2.5 < slow <= 5.0

    def test_it_is_interpolated_inside_the_bucket(self) -> None:
        low = history.p95(*self.within(*[0.011] * 100))
        assert low == pytest.approx(0.01 + 0.95 * 0.015)

    def test_past_the_last_edge_it_reads_as_the_last_edge(self) -> None:
        assert history.p95(*self.within(7200.0, 7200.0)) == EDGES[-1]


class TestLastHour:
    def test_one_point_per_minute_ending_with_the_last_whole_minute(self, now) -> None:
        end = current_minute(now)
        write(end - MINUTE, succeeded=7, retried=2, dead=1, due=4, running=3, oldest_due_age=9.5)
        write(end - 2 * MINUTE, succeeded=5)
        write(end - 61 * MINUTE, succeeded=100)  # before the range
        write(end, succeeded=100)  # the current minute: not over yet, not drawn
        past = history.collect(history.RANGES["1h"], now=now)
        assert len(past.starts) == 60
        assert (past.starts[0], past.starts[-1]) == (end - 60 * MINUTE, end - MINUTE)
        (points,) = past.queues.values()
        last = points[-1]
        assert (last.succeeded, last.retried, last.dead) == (7, 2, 1)
        assert (last.due, last.running, last.oldest_due_age) == (4, 3, 9.5)
        assert points[-2].succeeded == 5
        assert sum(p.sampled for p in points) == 2

    def test_a_minute_nobody_sampled_is_a_gap_and_an_idle_queue_is_zero(self, now) -> None:
        end = current_minute(now)
        write(end - MINUTE, "busy", succeeded=3, due=2)
        write(end - 3 * MINUTE, "busy", succeeded=1)
        write(end - 3 * MINUTE, "quiet", succeeded=2)
        past = history.collect(history.RANGES["1h"], now=now)
        assert list(past.queues) == ["busy", "quiet"]
        quiet = past.queues["quiet"]
        # A minute sampled for another queue only: nothing was there to count.
        assert (quiet[-1].sampled, quiet[-1].succeeded, quiet[-1].due) == (1, 0.0, 0)
        assert quiet[-1].p95_run_time is None
        # A minute no worker sampled: a gap for every queue.
        for points in past.queues.values():
            gap = points[-2]
            assert (gap.sampled, gap.succeeded, gap.due, gap.oldest_due_age) == (
                0,
                None,
                None,
                None,
            )
        assert quiet[-3].succeeded == 2


class TestCoarserPoints:
    def test_a_day_in_ten_minute_points_averages_counts_and_keeps_peaks(self, now) -> None:
        end = current_minute(now)
        past = history.collect(history.RANGES["24h"], now=now)
        assert len(past.starts) == 144
        assert all(s.minute % 10 == 0 for s in past.starts)
        assert past.starts[-1] <= end - MINUTE < past.starts[-1] + 10 * MINUTE
        point_start = past.starts[-2]  # a whole point, inside the range
        write(point_start, succeeded=10, due=1, oldest_due_age=5.0, **run_times(0.03, 0.03))
        write(point_start + 4 * MINUTE, succeeded=20, due=8, oldest_due_age=2.0)
        write(point_start + 9 * MINUTE, succeeded=0, due=3, **run_times(*[4.0] * 18))
        write(point_start + 9 * MINUTE, "other", succeeded=6)
        points = history.collect(history.RANGES["24h"], now=now).queues["default"]
        point = points[-2]
        assert point.start == point_start
        assert point.sampled == 3
        assert point.succeeded == pytest.approx(10.0)  # 30 jobs over 3 sampled minutes
        assert (point.due, point.oldest_due_age) == (8, 5.0)
        # 20 runs, two fast: the 95th percentile comes from the 4 s bucket of the summed counts.
        assert point.p95_run_time is not None
        assert 2.5 < point.p95_run_time <= 5.0
        other = history.collect(history.RANGES["24h"], now=now).queues["other"][-2]
        assert other.succeeded == pytest.approx(2.0)  # 6 over the point's 3 sampled minutes

    def test_a_week_in_hours(self, now) -> None:
        end = current_minute(now)
        week = history.collect(history.RANGES["7d"], now=now)
        assert len(week.starts) == 168
        assert all((s.minute, s.second) == (0, 0) for s in week.starts)
        hour = week.starts[0]
        write(hour, dead=60)
        write(hour + 59 * MINUTE, dead=0, running=2)
        write(hour - MINUTE, dead=1000)  # the hour before the range
        points = history.collect(history.RANGES["7d"], now=now).queues["default"]
        assert (points[0].dead, points[0].running, points[0].sampled) == (30.0, 2, 2)
        assert all(p.sampled == 0 for p in points[1:])
        assert week.starts[-1] <= end - MINUTE


@override_settings(TIME_ZONE="Asia/Kolkata")
def test_points_are_the_same_in_a_half_hour_time_zone(now) -> None:
    """Points are cut in UTC, whatever the site's zone (MySQL needs no time zone tables)."""
    past = history.collect(history.RANGES["24h"], now=now)
    start = past.starts[-2]
    write(start + 9 * MINUTE, succeeded=9)
    write(start + 10 * MINUTE, succeeded=100)  # the next point
    points = history.collect(history.RANGES["24h"], now=now).queues["default"]
    assert (points[-2].start, points[-2].succeeded) == (start, 9.0)


def test_the_ranges_and_their_points() -> None:
    assert {k: (r.points, r.step) for k, r in history.RANGES.items()} == {
        "1h": (60, 1),
        "24h": (144, 10),
        "7d": (168, 60),
    }
    assert history.DEFAULT_RANGE is history.RANGES["1h"]
