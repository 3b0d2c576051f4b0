"""Scheduler processes racing on the same schedules, and one killed mid-emission (SIGKILL).

Each scheduler is a real ``manage.py tickschedules`` subprocess on the test database. Time is
moved by putting schedule cursors hours back in the database, never by sleeping.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.db import connection

from django_leasejobs.core.occurrences import occurrences_between
from django_leasejobs.models import Job, Schedule, ScheduleSkip

from ..conftest import shifted

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.slow,  # .ci/run: each database's pass, not the Django-version or binding passes
    pytest.mark.django_db(transaction=True),
]

MANAGE = Path(__file__).resolve().parents[2] / "testproject" / "manage.py"


def database_url() -> str:
    """The test database, for the subprocesses."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings['NAME']}"
    scheme = {"postgresql": "postgres", "mysql": "mysql"}[connection.vendor]
    user = quote(settings["USER"] or "")
    password = f":{quote(settings['PASSWORD'])}" if settings["PASSWORD"] else ""
    port = f":{settings['PORT']}" if settings["PORT"] else ""
    url = f"{scheme}://{user}{password}@{settings['HOST']}{port}/{settings['NAME']}"
    if connection.vendor == "postgresql":
        # Commits need not wait for the disk: this test is about interleavings, not durability.
        url += "?options=-c%20synchronous_commit%3Doff"
    return url


def scheduler(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "DATABASE_URL": database_url(), "DEBUG": "false"}
    return subprocess.Popen(
        [sys.executable, str(MANAGE), "tickschedules", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> tuple[dict[str, Any], str]:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1]), err


def per_minute_schedules(count: int, hours_back: float) -> dict[int, dt.datetime]:
    """``count`` per-minute schedules whose cursors stand ``hours_back`` hours in the past."""
    Schedule.objects.bulk_create(
        Schedule(
            name=f"minutely-{i}",
            cron="* * * * *",
            job="testapp.jobs.noop",
            misfire="all",
            catchup_window=int(hours_back * 3600) + 3600,
        )
        for i in range(count)
    )
    Schedule.objects.update(last_occurrence_at=shifted(-hours_back * 3600))
    return dict(Schedule.objects.values_list("pk", "last_occurrence_at"))


def assert_one_job_per_occurrence(starts: dict[int, dt.datetime]) -> int:
    """From each start to each cursor: exactly one job per occurrence, no gap, no extra job."""
    total = 0
    for schedule in Schedule.objects.all():
        expected = occurrences_between(schedule, starts[schedule.pk], schedule.last_occurrence_at)
        emitted = list(
            Job.objects.filter(schedule=schedule)
            .order_by("occurrence_at")
            .values_list("occurrence_at", flat=True)
        )
        assert emitted == expected, schedule.name
        total += len(emitted)
    assert not ScheduleSkip.objects.exists()
    return total


def test_four_schedulers_emit_three_hours_of_twenty_schedules_exactly_once() -> None:
    starts = per_minute_schedules(20, hours_back=3)
    processes = [scheduler("--limit", "7") for _ in range(4)]
    results = [finish(process) for process in processes]
    total = assert_one_job_per_occurrence(starts)
    assert total >= 20 * 180
    assert Job.objects.count() == total == sum(result["emitted"] for result, _ in results)
    assert sum(result["emitted"] > 0 for result, _ in results) >= 2, results  # they did race
    # The cursor's compare-and-set alone kept them apart: the unique key was never needed.
    assert not any("schedule.occurrence_exists" in err for _, err in results)


def test_a_scheduler_killed_inside_its_emission_leaves_no_duplicate_and_no_gap(
    tmp_path: Path,
) -> None:
    starts = per_minute_schedules(3, hours_back=0.5)
    marker = tmp_path / "paused"
    victim = scheduler("--pause-after-emit", str(marker))
    deadline = time.monotonic() + 120
    while not marker.exists():  # waiting for the process to reach the point, not for time
        assert victim.poll() is None, victim.communicate()
        assert time.monotonic() < deadline, "the scheduler never emitted"
        time.sleep(0.05)
    schedule_id, occurrence = json.loads(marker.read_text())
    victim.kill()  # SIGKILL: after the INSERT and the cursor UPDATE, before COMMIT
    victim.communicate()
    assert not Job.objects.exists()
    assert Schedule.objects.get(pk=schedule_id).last_occurrence_at == starts[schedule_id]

    results = [finish(process) for process in [scheduler(), scheduler()]]
    total = assert_one_job_per_occurrence(starts)
    assert total >= 3 * 30
    assert sum(result["emitted"] for result, _ in results) == total
    killed = Job.objects.get(schedule_id=schedule_id, occurrence_at=occurrence)
    assert killed.status == "pending"
