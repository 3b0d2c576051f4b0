"""The worker's log: one line per state change, with what an operator needs to find the job.

Each transition is written once, by the side that knows the most about it: the worker for a
success or a release (name, queue, duration), the protocol for a retry, a timeout, a dead
letter, a cancel and a refused write (the error and the reason). DEBUG lines trace the
protocol's statements and are not counted here.
"""

from __future__ import annotations

import collections
import logging
import re

import pytest
from testapp import jobs
from testapp.models import Hit

from django_leasejobs import protocol
from django_leasejobs.models import Status
from django_leasejobs.runtime.worker import Worker

from ..conftest import fields
from ..invariants import wait_for
from .test_worker import FAST, Background

pytestmark = pytest.mark.django_db(transaction=True)

LINE = re.compile(
    r"^job\.(?P<outcome>\w+) id=(?P<id>\d+) name=(?P<name>\S+) attempt=(?P<attempt>\d+) "
    r"queue=(?P<queue>\S+) duration=(?P<duration>[\d.]+)s worker=(?P<worker>\S+)$"
)


def test_a_success_is_one_line_with_name_queue_attempt_and_duration(caplog) -> None:
    quick = jobs.noop.enqueue()
    valued = jobs.add.enqueue(1, 2)
    with caplog.at_level(logging.INFO, logger="django_leasejobs"):
        Worker(queues=None, concurrency=2, poll=0.05, scheduler=False, worker_id="w-log").run(
            burst=True
        )
    lines = [m.groupdict() for r in caplog.records if (m := LINE.match(r.getMessage()))]
    by_id = {int(line["id"]): line for line in lines}
    assert len(lines) == 2 == len(by_id)
    assert {by_id[quick.pk]["outcome"], by_id[valued.pk]["outcome"]} == {"succeeded"}
    assert by_id[valued.pk]["name"] == "testapp.jobs.add"
    assert {line["queue"] for line in lines} == {"default"}
    assert {line["attempt"] for line in lines} == {"1"}
    assert {line["worker"] for line in lines} == {"w-log"}
    assert all(float(line["duration"]) >= 0 for line in lines)


def events(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    """``(event, job id or "")`` of each INFO-or-louder line, in order."""
    found = []
    for record in caplog.records:
        if record.levelno < logging.INFO or record.name != "django_leasejobs":
            continue
        message = record.getMessage()
        job_id = re.search(r" id=(\d+)\b", message) if message.startswith("job.") else None
        found.append((message.split()[0], job_id.group(1) if job_id else ""))
    return found


def test_each_state_change_of_a_run_is_logged_once(caplog) -> None:
    succeeds = jobs.noop.enqueue()
    retried = jobs.flaky.enqueue(succeed_on=2)
    dead = jobs.permanent.enqueue()
    timed_out = jobs.times_out.enqueue(seconds=0.8)  # ignores its timeout once, then succeeds
    cooperative = jobs.until_cancelled.enqueue()
    waiting = jobs.noop.enqueue(delay=3600)
    with (
        caplog.at_level(logging.DEBUG, logger="django_leasejobs"),
        Background(Worker(concurrency=4, worker_id="w-once", **{**FAST, "scheduler": True})),
    ):
        wait_for(lambda: fields(cooperative.pk, "status")["status"] == Status.RUNNING)
        assert protocol.request_cancel(cooperative.pk) is protocol.Cancel.REQUESTED
        assert protocol.request_cancel(waiting.pk) is protocol.Cancel.CANCELLED
        wait_for(lambda: Hit.objects.filter(job_id=cooperative.pk).exists())  # it returned
        wait_for(lambda: Hit.objects.filter(job_id=timed_out.pk).count() == 2)
        wait_for(
            lambda: all(
                fields(j.pk, "status")["status"] in (Status.SUCCEEDED, Status.DEAD)
                for j in (succeeds, retried, dead, timed_out)
            )
        )
    seen = events(caplog)
    by_job: dict[str, list[str]] = collections.defaultdict(list)
    for event, job_id in seen:
        if job_id:
            by_job[job_id].append(event)
    assert by_job[str(succeeds.pk)] == ["job.running", "job.succeeded"]
    assert by_job[str(retried.pk)] == ["job.running", "job.failed", "job.running", "job.succeeded"]
    assert by_job[str(dead.pk)] == ["job.running", "job.dead"]
    assert by_job[str(timed_out.pk)] == [
        "job.running",
        "job.timeout",
        "job.running",
        "job.succeeded",
    ]
    assert by_job[str(cooperative.pk)] == ["job.running", "job.cancel_requested", "job.cancelled"]
    assert by_job[str(waiting.pk)] == ["job.cancelled"]
    assert not any(event == "job.stale" for event, _ in seen)
    once = collections.Counter(event for event, job_id in seen if not job_id)
    for event in ("worker.started", "schedule.synced", "worker.stopping", "worker.stopped"):
        assert once[event] == 1, (event, seen)
    assert "worker.schedules_synced" not in once
