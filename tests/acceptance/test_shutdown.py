"""SIGTERM: short jobs finish, long ones are released to another worker; a second signal exits."""

from __future__ import annotations

import signal

import pytest
from testapp import jobs
from testapp.models import Hit

from django_leasejobs.models import Job, Status

from ..invariants import check_invariants, wait_for
from .conftest import FAST

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def test_sigterm_finishes_short_jobs_and_releases_long_ones(spawn) -> None:
    short = [jobs.sleep.enqueue(0.5, label=f"short{i}") for i in range(2)]
    long = [jobs.sleep.enqueue(4, label=f"long{i}") for i in range(2)]
    ids = [j.pk for j in short + long]
    worker = spawn("--concurrency", "4", "--grace", "1.5", *FAST, name="term")
    wait_for(
        lambda: (
            Job.objects.filter(
                pk__in=ids, status=Status.RUNNING, lease_owner=worker.worker_id
            ).count()
            == 4
        ),
        what="all four running",
    )
    worker.send(signal.SIGTERM)
    assert worker.wait() == 0
    log = worker.log()
    assert "worker.stopping" in log
    assert "succeeded=2 retried=0 dead=0 stale=0 released=2" in log

    for job in short:
        row = Job.objects.get(pk=job.pk)
        assert (row.status, row.attempt, row.released) == (Status.SUCCEEDED, 1, 0)
    for job in long:
        row = Job.objects.get(pk=job.pk)
        # Released: pending and due now, token kept, the attempt not charged.
        assert (row.status, row.attempt, row.released, row.lease_owner) == (
            Status.PENDING,
            1,
            1,
            "",
        )

    other = spawn("--burst", "--concurrency", "2", *FAST, name="other")
    assert other.wait() == 0
    for job in long:
        row = Job.objects.get(pk=job.pk)
        assert (row.status, row.attempt, row.released) == (Status.SUCCEEDED, 2, 1)
        assert Hit.objects.filter(job_id=job.pk, attempt=2).exists()
    check_invariants(ids)


def test_a_second_signal_exits_at_once_and_the_leases_expire(spawn) -> None:
    job = jobs.sleep.enqueue(60, label="abandoned")
    worker = spawn("--concurrency", "1", "--grace", "120", *FAST, name="twice")
    wait_for(
        lambda: Job.objects.filter(pk=job.pk, lease_owner=worker.worker_id).exists(),
        what="claimed",
    )
    worker.send(signal.SIGTERM)
    wait_for(lambda: "worker.stopping" in worker.log(), what="first signal handled")
    worker.send(signal.SIGTERM)
    assert worker.wait() == 1  # well inside the 120 s grace
    assert "worker.forced_exit" in worker.log()
    row = Job.objects.get(pk=job.pk)
    # Nothing released: the lease is left to expire and lease recovery takes the job again.
    assert (row.status, row.lease_owner, row.released) == (Status.RUNNING, worker.worker_id, 0)
    check_invariants([job.pk], final=False)
