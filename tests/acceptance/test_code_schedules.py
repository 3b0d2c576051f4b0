"""``@job(cron=...)`` in real worker processes: a worker of the release that declares the
schedule syncs and emits it; a worker of an older release (the job not registered) leaves it.

The cursor is not waited for: the schedule's ``created_at`` is moved back in the database.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import pytest

from django_leasejobs.models import Job, Schedule, Status

from ..conftest import shifted
from ..invariants import wait_for
from .conftest import WorkerProcess, wait_started

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

NAME = "cronapp.jobs.every_minute"
OPTIONS = ["--lease", "5", "--heartbeat", "1", "--poll", "0.1", "--concurrency", "1"]


def test_a_worker_emits_the_occurrence_and_an_old_release_leaves_the_schedule(
    spawn: Callable[..., WorkerProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "testproject.cron_settings")
    new = spawn(*OPTIONS, name="new")
    wait_started(new)
    wait_for(lambda: Schedule.objects.filter(name=NAME).exists(), what="the schedule synced")
    schedule = Schedule.objects.get(name=NAME)
    assert (schedule.job, schedule.cron, schedule.timezone) == (NAME, "* * * * *", "Europe/Paris")
    assert schedule.from_code
    assert schedule.enabled
    # Three minutes pass for the scheduler: the newest missed minute is emitted and run.
    Schedule.objects.filter(name=NAME).update(created_at=shifted(-3 * 60))
    wait_for(
        lambda: Job.objects.filter(name=NAME, status=Status.SUCCEEDED).exists(),
        what="the occurrence run",
    )
    emitted = Job.objects.get(name=NAME)
    assert emitted.schedule_id == schedule.pk
    assert emitted.occurrence_at.second == 0
    assert emitted.result == "ran"

    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "testproject.test_settings")
    old = spawn(*OPTIONS, name="old")
    wait_started(old)
    wait_for(lambda: "schedule.synced" in old.log(), what="the old worker's sync")
    assert f"kept 1 ({NAME})" in old.log()
    schedule.refresh_from_db()
    assert schedule.enabled
    assert schedule.synced_spec is not None
    for worker in (new, old):
        worker.send(signal.SIGTERM)
        assert worker.wait() == 0, worker.log()
    # Two schedulers ran (a minute may have turned meanwhile): still one job per occurrence.
    occurrences = list(Job.objects.filter(name=NAME).values_list("occurrence_at", flat=True))
    assert len(occurrences) == len(set(occurrences)) >= 1
