"""A worker's own row: written by its heartbeat, counting stuck handlers, gone at a clean stop."""

from __future__ import annotations

import os
import socket

import pytest
from testapp import jobs
from testapp.models import Hit

from django_leasejobs.models import Job, Status
from django_leasejobs.models import Worker as WorkerRow
from django_leasejobs.runtime.worker import Worker

from ..conftest import worker_row
from ..invariants import check_invariants, wait_for
from .test_worker import FAST, Background

pytestmark = pytest.mark.django_db(transaction=True)


def row(worker_id: str) -> WorkerRow | None:
    return WorkerRow.objects.filter(worker_id=worker_id).first()


def test_the_heartbeat_writes_the_row_and_a_clean_stop_deletes_it() -> None:
    worker = Worker(["default", "mail"], concurrency=3, worker_id="row-w", **FAST)
    with Background(worker):
        found = wait_for(lambda: row("row-w"), what="the first beat")
        assert (found.host, found.pid) == (socket.gethostname(), os.getpid())
        assert (found.queues, found.concurrency, found.lease_seconds) == ("default,mail", 3, 5.0)
        assert (found.running, found.stuck) == (0, 0)
        first_seen = found.last_seen_at
        wait_for(lambda: row("row-w").last_seen_at > first_seen, what="a later beat")
        assert row("row-w").started_at == found.started_at
    assert row("row-w") is None


def test_the_row_counts_a_stuck_handler_until_it_returns() -> None:
    job = jobs.times_out.enqueue(seconds=3)  # timeout 0.5 s; attempt 1 sleeps 3 s regardless
    worker = Worker(concurrency=1, worker_id="stuck-w", **FAST)
    with Background(worker):
        wait_for(lambda: (r := row("stuck-w")) and r.stuck == 1, what="the stuck count")
        wait_for(lambda: Hit.objects.filter(job_id=job.pk).exists(), what="the handler to end")
        wait_for(lambda: row("stuck-w").stuck == 0, what="the stuck count to drop")
        wait_for(lambda: Job.objects.get(pk=job.pk).status == Status.SUCCEEDED, what="retry")
    assert worker.summary.stuck == 1
    check_invariants([job.pk])


def test_maintenance_prunes_rows_not_seen_for_ten_leases() -> None:
    worker_row("long-gone", seconds_ago=10 * FAST["lease"] + 60)
    worker_row("just-lost", seconds_ago=2 * FAST["lease"])
    Worker(worker_id="pruner", **FAST).run(burst=True)
    assert list(WorkerRow.objects.values_list("worker_id", flat=True)) == ["just-lost"]
