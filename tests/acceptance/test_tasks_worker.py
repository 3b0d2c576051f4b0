"""django.tasks tasks on real ``runjobworker`` processes: ``--burst`` and a ``kill -9`` recovery."""

from __future__ import annotations

import signal

import pytest
from testapp import tasks
from testapp.models import Hit

from django_leasejobs.models import DeadLetter, Job, Status

from ..conftest import shifted
from ..invariants import check_invariants, wait_for
from .conftest import FAST

try:
    from django.tasks import TaskResultStatus
except ImportError:  # Django 5.2: the backport
    from django_tasks import TaskResultStatus

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def test_burst_runs_tasks_with_retries_dead_letters_and_async(spawn) -> None:
    added = tasks.add.enqueue(2, 3)
    flaky = tasks.flaky.enqueue(succeed_on=3)  # zero backoff: its retries are due at once
    doomed = tasks.always_fails.enqueue()
    awaited = tasks.async_add.enqueue(4, 5)
    ids = [int(r.id) for r in (added, flaky, doomed, awaited)]
    workers = []
    for _ in range(4):  # each burst drains what is due; retries are made due between bursts
        worker = spawn("--burst", "--concurrency", "2", *FAST, name=f"burst{len(workers)}")
        assert worker.wait() == 0, worker.log()
        workers.append(worker.worker_id)
        if not Job.objects.filter(pk__in=ids, status__in=[Status.PENDING, Status.FAILED]).exists():
            break
        Job.objects.filter(pk__in=ids, status=Status.FAILED).update(run_at=shifted(-1))

    for result in (added, flaky, doomed, awaited):
        result.refresh()
    assert (added.status, added.return_value) == (TaskResultStatus.SUCCESSFUL, 5)
    assert (awaited.status, awaited.return_value) == (TaskResultStatus.SUCCESSFUL, 9)
    assert flaky.return_value == "ok on attempt 3"
    assert len(flaky.worker_ids) == 3
    assert set(flaky.worker_ids) <= set(workers)
    assert len(flaky.errors) == 2
    assert doomed.status == TaskResultStatus.FAILED
    assert [e.exception_class for e in doomed.errors] == [ValueError] * 3
    assert DeadLetter.objects.filter(job_id=int(doomed.id)).exists()
    check_invariants(ids)


def test_kill_9_mid_task_another_worker_runs_it_as_attempt_2(spawn) -> None:
    result = tasks.sleep.enqueue(3, label="survivor")
    job_id = int(result.id)
    first = spawn("--concurrency", "1", *FAST, name="first")
    wait_for(
        lambda: Job.objects.filter(pk=job_id, status=Status.RUNNING).exists(),
        what="first worker claims",
    )
    result.refresh()
    assert result.status == TaskResultStatus.RUNNING
    first.send(signal.SIGKILL)
    assert first.wait() == -signal.SIGKILL

    second = spawn("--concurrency", "1", *FAST, name="second")
    # Expire the lease instead of waiting for it; the second worker recovers the job.
    Job.objects.filter(pk=job_id).update(lease_expires_at=shifted(-1))
    wait_for(
        lambda: Job.objects.filter(pk=job_id, status=Status.FAILED).exists(),
        what="lease recovery",
    )
    Job.objects.filter(pk=job_id).update(run_at=shifted(-1))
    wait_for(lambda: Job.objects.get(pk=job_id).status == Status.SUCCEEDED, what="success")

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.attempts == 2
    assert result.worker_ids == [first.worker_id, second.worker_id]
    assert result.errors[0].exception_class_path == "django_leasejobs.errors.LeaseExpiredError"
    assert list(Hit.objects.filter(job_id=job_id).values_list("attempt", flat=True)) == [2]
    check_invariants([job_id])
    second.send(signal.SIGTERM)
    assert second.wait() == 0
