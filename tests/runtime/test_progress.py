"""ctx.progress(): throttled to about one write a second, the last report always written with
the attempt's end, from sync and async handlers, in-process and in the worker."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import Job, Status
from django_leasejobs.runtime import progress as progress_module
from django_leasejobs.runtime.progress import Progress
from django_leasejobs.testing import drain, run_job

pytestmark = pytest.mark.django_db


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def running_job() -> Job:
    jobs.noop.enqueue()
    (job,) = protocol.claim("w1", batch=1)
    return job


def progress_updates(queries: CaptureQueriesContext) -> int:
    return sum(
        1
        for q in queries.captured_queries
        if q["sql"].upper().startswith("UPDATE") and "progress" in q["sql"].lower()
    )


def stored(job_id: int) -> tuple:
    progress = Job.objects.get(pk=job_id).progress
    return progress["done"], progress["total"], progress["message"]


def test_reports_every_10_ms_for_5_s_make_at_most_7_writes() -> None:
    job = running_job()
    clock = FakeClock()
    progress = Progress(job.pk, job.attempt, clock=clock)
    with CaptureQueriesContext(connection) as queries:
        for step in range(1, 501):
            progress.update(step, 500)
            clock.now += 0.01
        progress.flush()
    assert progress_updates(queries) <= 7
    assert stored(job.pk) == (500, 500, "")  # the last report is written


def test_the_first_report_is_written_at_once_the_next_after_the_interval() -> None:
    job = running_job()
    clock = FakeClock()
    progress = Progress(job.pk, job.attempt, clock=clock)
    progress.update(1, 10, "first")
    assert stored(job.pk) == (1, 10, "first")
    clock.now += 0.5
    progress.update(2, 10, "kept")
    assert stored(job.pk) == (1, 10, "first")
    assert progress.pending
    clock.now += 0.5
    progress.update(3, 10, "due")
    assert stored(job.pk) == (3, 10, "due")
    assert not progress.pending


def test_flush_writes_only_a_pending_report() -> None:
    job = running_job()
    progress = Progress(job.pk, job.attempt, clock=FakeClock())
    with CaptureQueriesContext(connection) as queries:
        progress.flush()  # nothing reported
        progress.update(1)
        progress.flush()  # already written
    assert progress_updates(queries) == 1


def test_a_report_of_a_stale_attempt_changes_nothing() -> None:
    job = running_job()
    progress = Progress(job.pk, job.attempt, interval=0)
    progress.update(1, 2)
    Job.objects.filter(pk=job.pk).update(attempt=job.attempt + 1)  # reclaimed elsewhere
    progress.update(2, 2, "late")
    progress.flush()
    assert stored(job.pk) == (1, 2, "")


def test_a_bad_report_raises_in_the_handler_and_writes_nothing() -> None:
    job = running_job()
    progress = Progress(job.pk, job.attempt)
    with pytest.raises(JobValidationError, match="less than done"):
        progress.update(5, 1)
    assert Job.objects.get(pk=job.pk).progress is None


def test_run_job_writes_the_last_report_with_the_end() -> None:
    assert run_job(jobs.report_progress, 5) == 5
    job = Job.objects.get(name=jobs.report_progress.name)
    assert job.status == Status.SUCCEEDED
    assert stored(job.pk) == (5, 5, "step 5")


def test_reports_are_written_during_the_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "INTERVAL", 0)
    with CaptureQueriesContext(connection) as queries:
        run_job(jobs.report_progress, 3)
    assert progress_updates(queries) == 3


def test_a_report_inside_the_handlers_transaction_waits_for_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(progress_module, "INTERVAL", 0)
    with CaptureQueriesContext(connection) as queries:
        run_job(jobs.report_progress, 3, atomic=True)
    assert progress_updates(queries) == 1  # the flush, outside the handler's transaction
    job = Job.objects.get(name=jobs.report_progress.name)
    assert stored(job.pk) == (3, 3, "step 3")


def test_an_async_handler_reports_progress() -> None:
    assert run_job(jobs.async_report_progress, 4) == 4
    job = Job.objects.get(name=jobs.async_report_progress.name)
    assert stored(job.pk) == (4, 4, "step 4")


def test_a_failed_attempt_keeps_its_last_report() -> None:
    job = jobs.progress_then_fail.enqueue()
    drain()
    row = Job.objects.get(pk=job.pk)
    assert row.status == Status.DEAD
    assert stored(job.pk) == (2, 2, "failing")


def test_wait_callers_see_the_progress() -> None:
    job = jobs.report_progress.enqueue(2)
    drain()
    assert job.wait(timeout=5) == 2
    job.refresh_from_db()
    assert job.progress["done"] == 2
    assert job.progress["message"] == "step 2"


@pytest.mark.django_db(transaction=True)
def test_the_worker_writes_sync_and_async_handlers_last_reports() -> None:
    from django_leasejobs.runtime.worker import Worker

    sync_job = jobs.report_progress.enqueue(3)
    async_job = jobs.async_report_progress.enqueue(4)
    failing = jobs.progress_then_fail.enqueue()
    Worker(concurrency=2, lease=5.0, heartbeat=0.1, poll=0.05, scheduler=False).run(burst=True)
    assert stored(sync_job.pk) == (3, 3, "step 3")
    assert stored(async_job.pk) == (4, 4, "step 4")
    assert stored(failing.pk) == (2, 2, "failing")
    assert Job.objects.get(pk=sync_job.pk).status == Status.SUCCEEDED
