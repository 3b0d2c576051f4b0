"""``job.wait()`` while real ``runjobworker`` processes run the jobs: the caller gets the result,
the dead job's error, the cancel, and (after a replay) the replaying job's result."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from testapp import jobs

from django_leasejobs import JobFailedError, protocol
from django_leasejobs.models import DeadLetter, Job, Status

from ..invariants import wait_for
from .conftest import FAST

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def test_waits_end_as_a_burst_worker_finishes_each_job(spawn) -> None:
    added = jobs.add.enqueue(19, 23)
    flaky = jobs.flaky.enqueue(succeed_on=2)  # no backoff: the retry is due at once
    doomed = jobs.permanent.enqueue()
    awaited = jobs.async_add.enqueue(4, 5)
    worker = spawn("--burst", "--concurrency", "2", *FAST, name="burst")

    assert added.wait(timeout=120) == 42
    assert flaky.wait(timeout=120) == "ok on attempt 2"
    with pytest.raises(JobFailedError) as caught:
        doomed.wait(timeout=120)
    assert (caught.value.status, caught.value.replayed_by) == (Status.DEAD, None)
    assert "this input can never work" in caught.value.error
    assert async_to_sync(awaited.await_result)(timeout=120) == 9
    assert worker.wait() == 0, worker.log()
    assert added.finished_by == worker.worker_id


def test_a_replayed_dead_job_points_to_the_job_that_replayed_it(spawn) -> None:
    doomed = jobs.flaky.enqueue(succeed_on=99, max_attempts=1)
    worker = spawn("--concurrency", "1", *FAST, name="steady")
    with pytest.raises(JobFailedError, match="is dead"):
        doomed.wait(timeout=120)
    letter = DeadLetter.objects.get(job=doomed)
    replay = protocol.replay(letter.pk, kwargs={"succeed_on": 1})

    with pytest.raises(JobFailedError, match=f"replayed as job {replay.pk}") as caught:
        doomed.wait(timeout=120)
    assert caught.value.replayed_by == replay.pk
    read = jobs.flaky.get_result(doomed.pk)
    assert (read.status, read.replayed_by) == (Status.DEAD, replay)
    assert jobs.flaky.get_result(caught.value.replayed_by).wait(timeout=120) == "ok on attempt 1"
    assert worker.alive()


def test_a_cancel_requested_while_the_job_runs_ends_the_wait(spawn) -> None:
    job = jobs.sleep.enqueue(60)
    spawn("--concurrency", "1", *FAST, name="sleeper")
    wait_for(
        lambda: Job.objects.filter(pk=job.pk, status=Status.RUNNING).exists(),
        what="the worker claims",
    )
    assert protocol.request_cancel(job.pk) is protocol.Cancel.REQUESTED
    with pytest.raises(JobFailedError, match="was cancelled") as caught:
        job.wait(timeout=120)
    assert caught.value.status == Status.CANCELLED
