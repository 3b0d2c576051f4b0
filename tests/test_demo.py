"""The README's first command: ``manage.py demo`` shows every kind of job's life."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import CommandError, call_command

from django_leasejobs.models import DeadLetter, Job, Status

pytestmark = pytest.mark.django_db(transaction=True)


def test_demo_runs_every_job_to_its_end_and_shows_the_way_to_the_admin() -> None:
    out = io.StringIO()
    call_command("demo", "--delay", "1", stdout=out)
    text = out.getvalue()
    rows = {
        int(m["id"]): m.groupdict()
        for m in re.finditer(
            r"^\s*(?P<id>\d+)\s+(?P<job>\w+)\s+(?P<status>\w+)\s+(?P<attempts>\d+)\s+(?P<life>.*)$",
            text,
            re.MULTILINE,
        )
    }
    jobs = {job.pk: job for job in Job.objects.all()}
    assert set(rows) == set(jobs)
    by_name = {}
    for pk, row in rows.items():
        by_name.setdefault(row["job"], []).append((pk, row))
    assert [r["status"] for _, r in by_name["greet"]] == [Status.SUCCEEDED] * 4
    ((flaky_id, flaky),) = by_name["flaky_fetch"]
    assert (flaky["status"], flaky["attempts"]) == (Status.SUCCEEDED, "3")
    assert jobs[flaky_id].result == "fetched https://example.invalid/report on attempt 3"
    ((poison_id, poison),) = by_name["poison"]
    assert (poison["status"], poison["attempts"]) == (Status.DEAD, "3")
    assert DeadLetter.objects.get(job_id=poison_id).reason == "attempts exhausted"
    delayed = by_name["greet"][-1][1]
    assert delayed["life"].startswith("waited 1.0 s")
    assert "job.dead id=" in text  # the worker's state changes are shown live
    assert "createsuperuser" in text
    assert "/admin/" in text


def test_demo_refuses_a_silly_delay() -> None:
    with pytest.raises(CommandError, match="--delay must be between 0 and 20 seconds"):
        call_command("demo", "--delay", "-1", stdout=io.StringIO())
