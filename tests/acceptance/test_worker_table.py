"""The table of live workers and async cancels, with real ``runjobworker`` processes.

A sync handler that ignores its timeout shows as stuck in its worker's row, in ``jobstats``,
``checkjobs --stuck-max`` and the health view, until it returns. An ``async def`` handler
awaiting a long sleep is cancelled by request (``protocol.request_cancel`` and ``manage.py
canceljob``): its task is cancelled, the fenced write ends it ``cancelled``, and the worker
goes on running jobs.
"""

from __future__ import annotations

import io
import json
import signal

import pytest
from django.core.management import call_command
from django.test import Client
from testapp import jobs
from testapp.models import Hit

from django_leasejobs import protocol
from django_leasejobs.models import Job, Status, Worker

from ..invariants import check_invariants, wait_for
from ..management.commands.test_monitoring_commands import check, run
from .conftest import FAST, wait_started

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

TOKEN = "tok3n-for-the-monitoring-views_0123456789abcdef"


def worker_row(worker_id: str) -> Worker | None:
    return Worker.objects.filter(worker_id=worker_id).first()


def status(job: Job) -> str:
    return Job.objects.values_list("status", flat=True).get(pk=job.pk)


def test_a_stuck_sync_handler_shows_in_the_row_jobstats_checkjobs_and_health(
    spawn, settings
) -> None:
    settings.LEASEJOBS_MONITORING_TOKEN = TOKEN
    worker = spawn("--concurrency", "1", *FAST, name="stuck")
    wait_started(worker)
    job = jobs.times_out.enqueue(seconds=8)  # timeout 0.5 s; attempt 1 sleeps 8 s regardless
    row = wait_for(
        lambda: (r := worker_row(worker.worker_id)) is not None and r.stuck == 1 and r,
        what="the row to show the stuck handler",
    )
    assert (row.pid, row.concurrency, row.queues) == (worker.pid, 1, "*")  # every queue

    data = json.loads(run("jobstats", "--json"))
    (mine,) = [w for w in data["workers"] if w["worker_id"] == worker.worker_id]
    assert (mine["stuck"], mine["lost"], data["stuck"]) == (1, False, 1)
    assert f"{worker.worker_id} " in run("jobstats")
    exit_status, output = check("--stuck-max", "0")
    assert exit_status == 1
    assert "UNHEALTHY workers: 1 stuck handler(s), more than 0" in output
    assert check("--stuck-max", "1")[0] == 0
    response = Client().get("/jobs/health/?max_stuck=0", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 503
    assert response.json()["stuck"] == 1

    wait_for(lambda: status(job) == Status.SUCCEEDED, what="the retry, once the thread is free")
    wait_for(lambda: worker_row(worker.worker_id).stuck == 0, what="the stuck count to drop")
    worker.send(signal.SIGTERM)
    assert worker.wait() == 0
    assert worker_row(worker.worker_id) is None, "a clean stop deletes the row"
    assert "timed_out=1 stuck=1" in worker.log()
    check_invariants([job.pk])


def test_cancelling_running_async_jobs_ends_them_cancelled_and_the_worker_goes_on(spawn) -> None:
    worker = spawn("--concurrency", "1", "--async-concurrency", "5", *FAST, name="async")
    by_call = jobs.async_until_cancelled.enqueue(seconds=300)
    by_command = jobs.async_until_cancelled.enqueue(seconds=300)
    ids = [by_call.pk, by_command.pk]
    wait_for(
        lambda: Job.objects.filter(pk__in=ids, status=Status.RUNNING).count() == 2,
        what="both running",
    )
    assert protocol.request_cancel(by_call.pk) is protocol.Cancel.REQUESTED
    out = io.StringIO()
    call_command("canceljob", str(by_command.pk), stdout=out)
    assert (
        out.getvalue()
        == f"job {by_command.pk}: cancel requested (running: its worker will end the attempt)\n"
    )
    wait_for(
        lambda: Job.objects.filter(pk__in=ids, status=Status.CANCELLED).count() == 2,
        what="the worker to end both",
    )
    for job in Job.objects.filter(pk__in=ids):
        assert (job.attempt, job.result, job.errors, job.lease_owner) == (1, None, [], "")
    # The worker goes on: a sync and an async job run after the cancels.
    after = [jobs.record.enqueue("after"), jobs.async_record.enqueue("async after")]
    wait_for(
        lambda: all(status(job) == Status.SUCCEEDED for job in after), what="later jobs to run"
    )
    assert Hit.objects.filter(job_id__in=[j.pk for j in after]).count() == 2
    wait_for(
        lambda: (r := worker_row(worker.worker_id)) is not None and r.running == 0,
        what="a beat with nothing held",
    )
    assert worker.alive()
    worker.send(signal.SIGTERM)
    assert worker.wait() == 0
    log = worker.log()
    assert "cancelled=2" in log
    assert "stuck=0" in log
    assert "Traceback" not in log
    check_invariants([*ids, *(j.pk for j in after)])
