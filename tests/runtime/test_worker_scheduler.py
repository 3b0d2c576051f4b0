"""The worker runs the scheduler: it syncs LEASEJOBS_SCHEDULES at start and ticks each round."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from django_leasejobs.models import Job, Schedule, Status
from django_leasejobs.runtime.worker import Worker

from ..conftest import shifted

pytestmark = pytest.mark.django_db

SPEC = {"job": "testapp.jobs.noop", "cron": "* * * * *"}


def overdue_schedule(minutes: int = 3) -> Schedule:
    """A per-minute schedule whose cursor the database clock left ``minutes`` behind."""
    schedule = Schedule.objects.create(
        name="every-minute", cron="* * * * *", job="testapp.jobs.noop", misfire="all"
    )
    Schedule.objects.filter(pk=schedule.pk).update(last_occurrence_at=shifted(-60 * minutes - 1))
    return schedule


def test_a_burst_worker_emits_and_runs_due_occurrences() -> None:
    schedule = overdue_schedule(minutes=3)
    Worker(queues=None, poll=0.05).run(burst=True)
    emitted = Job.objects.filter(schedule=schedule)
    assert emitted.count() >= 3
    assert set(emitted.values_list("status", flat=True)) == {Status.SUCCEEDED}
    occurrences = list(emitted.order_by("occurrence_at").values_list("occurrence_at", flat=True))
    gaps = {later - earlier for earlier, later in itertools.pairwise(occurrences)}
    assert gaps == {dt.timedelta(minutes=1)}


def test_no_scheduler_emits_nothing() -> None:
    schedule = overdue_schedule()
    Worker(queues=None, poll=0.05, scheduler=False).run(burst=True)
    assert not Job.objects.filter(schedule=schedule).exists()


@override_settings(LEASEJOBS_SCHEDULES={"nightly": {**SPEC, "cron": "0 3 * * *"}})
def test_worker_start_syncs_schedules_from_settings() -> None:
    Worker(queues=None, poll=0.05).run(burst=True)
    nightly = Schedule.objects.get(name="nightly")
    assert (nightly.cron, nightly.job, nightly.enabled) == ("0 3 * * *", SPEC["job"], True)


@override_settings(LEASEJOBS_SCHEDULES={"broken": {**SPEC, "cron": "61 * * * *"}})
def test_runjobworker_refuses_to_start_with_invalid_schedules() -> None:
    with pytest.raises(CommandError, match="broken"):
        call_command("runjobworker", "--burst")
    assert not Schedule.objects.filter(name="broken").exists()


@override_settings(LEASEJOBS_SCHEDULES={"nightly": SPEC})
def test_runjobworker_no_scheduler_does_not_sync() -> None:
    call_command("runjobworker", "--burst", "--no-scheduler")
    assert not Schedule.objects.exists()
