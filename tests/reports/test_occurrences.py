"""What became of a schedule's occurrences: each beside its job, its skip or the gap it left.

Time moves by moving schedule cursors back in the database, as in the scheduler's tests, whose
helpers these use.
"""

from __future__ import annotations

import datetime as dt

import pytest

from django_leasejobs.db.dbtime import db_now
from django_leasejobs.models import Job, Schedule
from django_leasejobs.reports.occurrences import occurrence_history
from django_leasejobs.runtime import schedules

from ..runtime.test_schedules import make

pytestmark = pytest.mark.django_db


def test_occurrence_history_shows_jobs_skips_pruned_and_due_occurrences() -> None:
    schedule = make(cursor_ago=2 * 3600, misfire="all", catchup_window=3600)
    start = schedule.last_occurrence_at
    schedules.tick()
    schedule.refresh_from_db()
    pruned = Job.objects.filter(schedule=schedule).order_by("occurrence_at").first()
    Job.objects.filter(pk=pruned.pk).delete()
    history = occurrence_history(schedule, start, db_now() + dt.timedelta(minutes=20))
    assert [o.state for o in history] == ["skipped"] * 6 + ["pruned"] + ["emitted"] * 5 + [
        "upcoming"
    ] * 2
    assert all(o.skip is not None for o in history[:6])
    assert all(o.job is not None and o.job.occurrence_at == o.at for o in history[7:12])
    # A scheduler that stopped: what is past due after the cursor shows as due.
    Schedule.objects.filter(pk=schedule.pk).update(last_occurrence_at=history[9].at)
    Job.objects.filter(occurrence_at__gt=history[9].at).delete()
    schedule.refresh_from_db()
    states = [o.state for o in occurrence_history(schedule, history[9].at, db_now())]
    assert states == ["due", "due"]
