"""``testing.travel()`` with cron schedules: moving time runs the occurrences it passes.

The time of day is what decides whether a schedule's next occurrence falls inside a travel, so
the tests set it the way the library reads it: a daily schedule whose hour and minute are the
database's now plus an offset, parametrized over the offsets (times of day).
"""

from __future__ import annotations

import datetime as dt

import pytest
from testapp import jobs

from django_leasejobs.db.dbtime import db_now
from django_leasejobs.models import Job, Schedule, Status
from django_leasejobs.testing import drain, travel

pytestmark = pytest.mark.django_db

DAY = 86400


def daily(settings, *, hours_ahead: float) -> dt.datetime:
    """Declare a daily schedule whose next occurrence is ``hours_ahead`` from the database's
    now (the minute rounded down, so never past); return that occurrence."""
    at = (db_now() + dt.timedelta(hours=hours_ahead)).astimezone(dt.timezone.utc)
    at = at.replace(second=0, microsecond=0)
    settings.LEASEJOBS_SCHEDULES = {
        "daily": {"job": jobs.noop.name, "cron": f"{at.minute} {at.hour} * * *", "timezone": "UTC"}
    }
    return at


def occurrences() -> list[dt.datetime]:
    return list(
        Job.objects.filter(name=jobs.noop.name, status=Status.SUCCEEDED)
        .order_by("occurrence_at")
        .values_list("occurrence_at", flat=True)
    )


@pytest.mark.parametrize("hours_ahead", [0.05, 1, 6, 12, 18, 23.5, 23.95])
def test_a_day_of_travel_runs_a_daily_schedule_once_whatever_the_time_of_day(
    settings, hours_ahead: float
) -> None:
    first = daily(settings, hours_ahead=hours_ahead)
    assert drain().total == 0  # synced; its next occurrence is ahead
    travel(DAY)
    assert drain().succeeded == 1
    assert drain().total == 0
    travel(DAY)  # travels add up: the next day's occurrence
    assert drain().succeeded == 1
    assert occurrences() == [first, first + dt.timedelta(days=1)]


@pytest.mark.parametrize("hours_ahead", [0.05, 7.5, 23.95])
def test_an_hour_at_a_time_reaches_the_occurrence_once(settings, hours_ahead: float) -> None:
    first = daily(settings, hours_ahead=hours_ahead)
    ran = []
    for _ in range(24):
        travel(3600)
        ran.append(drain().succeeded)
    assert sum(ran) == 1
    assert ran.index(1) == int(hours_ahead)  # in the hour it falls in, not before
    assert occurrences() == [first]


def test_a_travel_that_passes_too_many_occurrences_says_so(settings) -> None:
    settings.LEASEJOBS_SCHEDULES = {"minutely": {"job": jobs.noop.name, "cron": "* * * * *"}}
    with pytest.raises(ValueError, match="passes more than 1000 occurrences of schedule "):
        travel(DAY)
    assert Job.objects.filter(name=jobs.noop.name).count() <= 1  # what was due before: no more
    travel(600)
    assert drain().succeeded >= 10


def test_travel_refuses_more_than_a_year() -> None:
    with pytest.raises(ValueError, match=r"travel\(\) moves at most 31622400 seconds"):
        travel(400 * DAY)


def test_a_broken_schedule_is_passed_over(settings) -> None:
    first = daily(settings, hours_ahead=2)
    Schedule.objects.create(name="gone", job="testapp.jobs.gone", cron="0 * * * *")
    travel(DAY)
    assert drain().succeeded == 1
    assert occurrences() == [first]
