"""A real worker counts runtimes, stale reports and recovered expiries, and flushes them.

In-process workers on the real database (``transaction=True``: the worker's threads have their
own connections). Time is moved in the database; waits poll the database.
"""

from __future__ import annotations

import pytest
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.core import histogram
from django_leasejobs.models import Job, RuntimeStat, Status
from django_leasejobs.runtime.worker import Worker

from ..conftest import fields, shifted, take_over
from ..invariants import wait_for
from .test_worker import FAST, Background

pytestmark = pytest.mark.django_db(transaction=True)

RECORD = "testapp.jobs.record"


def row(name: str) -> RuntimeStat | None:
    return RuntimeStat.objects.filter(name=name).first()


def test_a_burst_flushes_its_runs_and_the_expiries_it_recovered() -> None:
    crashed = jobs.record.enqueue("crashed")
    (claimed,) = protocol.claim("crashed-worker", batch=1)
    assert claimed.pk == crashed.pk
    Job.objects.filter(pk=crashed.pk).update(lease_expires_at=shifted(-1))
    jobs.record.enqueue_many([((f"j{i}",), {}) for i in range(3)])
    jobs.short_lease.enqueue()
    summary = Worker(concurrency=2, **{**FAST, "lease": 7.0}).run(burst=True)
    assert summary.succeeded == 4  # the recovered job waits for its backoff
    assert fields(crashed.pk, "status")["status"] == Status.FAILED
    record, short = row(RECORD), row("testapp.jobs.short_lease")
    assert record is not None
    assert short is not None
    assert (record.runs, record.recovered, record.stale) == (3, 1, 0)
    assert sum(record.histogram()) == 3
    assert record.seconds >= record.max_seconds > 0
    assert (record.lease_seconds, record.heartbeat_seconds) == (7.0, 0.1)
    assert short.runs == 1
    assert short.lease_seconds == 5.0  # its own @job(lease=5), not the worker's
    assert RuntimeStat.objects.count() == 2  # one row per name and hour, not per run


def test_the_heartbeat_flushes_while_the_worker_runs() -> None:
    with Background(Worker(concurrency=1, **FAST)):
        jobs.record.enqueue("first")
        found = wait_for(lambda: row(RECORD), what="flushed by a heartbeat")
        assert found.runs == 1
        jobs.record.enqueue("second")
        wait_for(lambda: RuntimeStat.objects.filter(name=RECORD, runs=2).exists(), what="added")
    assert RuntimeStat.objects.filter(name=RECORD).count() == 1


def test_a_lost_lease_is_counted_as_a_stale_report() -> None:
    job = jobs.sleep.enqueue(60, label="first")
    worker = Worker(concurrency=1, **FAST)
    with Background(worker) as running:
        wait_for(lambda: fields(job.pk, "status")["status"] == Status.RUNNING, what="claimed")
        take_over(job.pk)  # another worker takes it over between two beats
        wait_for(lambda: running.worker.slots.total == 0, what="handler stopped")
    assert running.summary is not None
    assert running.summary.stale == 1
    stats = row("testapp.jobs.sleep")
    assert stats is not None
    assert (stats.stale, stats.runs, stats.recovered) == (1, 1, 0)
    assert sum(stats.histogram()) == 1
    assert stats.histogram()[histogram.index(stats.max_seconds)] == 1
