"""Timeouts, cancelling running jobs and ``--max-stuck``, with real ``runjobworker`` processes.

A handler that ignores ``ctx.cancelled`` keeps running in its worker: the tests show that its
late result changes nothing, that another worker runs the retry exactly once, and that a
worker with ``--max-stuck`` exits (status 3) for its supervisor to start a fresh one.
"""

from __future__ import annotations

import signal

import pytest
from testapp import jobs
from testapp.models import Hit

from django_leasejobs import protocol
from django_leasejobs.models import Job, Status

from ..invariants import check_invariants, wait_for
from .conftest import FAST, wait_started

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.slow,  # .ci/run: each database's pass, not the Django-version or binding passes
    pytest.mark.django_db(transaction=True),
]

STUCK_EXIT_CODE = 3


def row(job: Job) -> dict:
    names = ("status", "attempt", "result", "errors", "finished_at", "finished_by", "lease_owner")
    return Job.objects.filter(pk=job.pk).values(*names).get()


def runs(job: Job) -> list[tuple[int, str]]:
    return list(
        Hit.objects.filter(job_id=job.pk).order_by("attempt").values_list("attempt", "label")
    )


def test_a_timed_out_handler_that_ignores_it_is_refused_and_retried_elsewhere_once(
    spawn,
) -> None:
    a = spawn("--concurrency", "1", *FAST, name="a")
    b = spawn("--concurrency", "1", *FAST, name="b")
    wait_started(a)
    wait_started(b)
    job = jobs.times_out.enqueue(seconds=4)  # timeout 0.5 s; attempt 1 sleeps 4 s regardless
    wait_for(lambda: row(job)["status"] == Status.SUCCEEDED, what="the retry to succeed")
    final = row(job)
    # The stuck worker's only thread was taken: the other one ran the retry.
    first = a if a.worker_id != final["finished_by"] else b
    second = b if first is a else a
    assert (final["attempt"], final["result"]) == (2, "attempt 2")
    assert final["finished_by"] == second.worker_id
    assert [(e["attempt"], e["kind"], e["worker"]) for e in final["errors"]] == [
        (1, "timeout", first.worker_id)
    ]
    wait_for(lambda: len(runs(job)) == 2, what="the timed-out handler to return")
    wait_for(lambda: f"job={job.pk} attempt=1 stuck=0" in first.log(), what="it returned")
    assert row(job) == final, "the late result changed the row"
    assert f"worker.stuck id={first.worker_id} job={job.pk}" in first.log()
    assert first.log().count(f"job.timeout id={job.pk} ") == 1
    assert "job.stale" not in first.log()  # a timeout is not a stale write
    assert "job.timeout" not in second.log()
    for worker in (a, b):
        worker.send(signal.SIGTERM)
        assert worker.wait() == 0
    assert "timed_out=1 stuck=1" in first.log()
    check_invariants([job.pk])


def test_cancel_of_running_sync_jobs_cooperative_or_not(spawn) -> None:
    worker = spawn("--concurrency", "2", *FAST, name="w")
    polite = jobs.until_cancelled.enqueue(seconds=60)
    deaf = jobs.ignores_cancel.enqueue(seconds=3)
    ids = [polite.pk, deaf.pk]
    wait_for(
        lambda: Job.objects.filter(pk__in=ids, status=Status.RUNNING).count() == 2,
        what="both running",
    )
    assert protocol.request_cancel(polite.pk) is protocol.Cancel.REQUESTED
    assert protocol.cancel(deaf.pk) is True
    wait_for(
        lambda: Job.objects.filter(pk__in=ids, status=Status.CANCELLED).count() == 2,
        what="the worker to end both",
    )
    assert runs(deaf) == []  # cancelled while its handler still slept
    wait_for(lambda: runs(polite) == [(1, "cancelled")], what="the handler to see ctx.cancelled")
    wait_for(lambda: runs(deaf) == [(1, "cancelled")], what="the deaf handler to return")
    wait_for(lambda: f"job={deaf.pk} attempt=1 stuck=0" in worker.log(), what="it returned")
    for job in (polite, deaf):  # a cooperative end is not an error: one line, no stale write
        assert worker.log().count(f"job.cancelled id={job.pk} ") == 1
    assert "job.stale" not in worker.log()
    for job in (polite, deaf):
        assert (row(job)["status"], row(job)["result"]) == (Status.CANCELLED, None)
    assert worker.alive()
    worker.send(signal.SIGTERM)
    assert worker.wait() == 0
    assert "cancelled=2" in worker.log()
    check_invariants(ids)


def test_max_stuck_exits_with_status_3_and_a_fresh_worker_finishes_the_job(spawn) -> None:
    job = jobs.times_out.enqueue(seconds=30)
    stuck = spawn("--concurrency", "1", "--max-stuck", "1", *FAST, name="stuck")
    assert stuck.wait() == STUCK_EXIT_CODE
    log = stuck.log()
    assert f"worker.stuck id={stuck.worker_id} job={job.pk}" in log
    assert "reason=max_stuck=1 reached" in log
    assert "stuck (--max-stuck 1)" in log  # the command's error line
    assert row(job)["status"] == Status.FAILED  # timed out, its retry due

    fresh = spawn("--concurrency", "1", *FAST, name="fresh")  # what a supervisor does
    wait_for(lambda: row(job)["status"] == Status.SUCCEEDED, what="the fresh worker")
    assert (row(job)["attempt"], row(job)["finished_by"]) == (2, fresh.worker_id)
    fresh.send(signal.SIGTERM)
    assert fresh.wait() == 0
    check_invariants([job.pk])
