"""The claim loop (``runtime.loop``): when a ``--burst`` worker goes home."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, transaction
from testapp import jobs

from django_leasejobs.models import Job, Status
from django_leasejobs.runtime.worker import Worker

from .test_worker import FAST

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_burst_worker_whose_claims_find_every_due_job_taken_does_not_go_home() -> None:
    """Concurrent claimers can take every row a claim read before it locks one (under load,
    twice in a row): the claim comes back empty while jobs are due. A burst worker tries
    again, a few times, before it says nothing is due."""
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has no row locks: a claim never finds its rows taken")
    jobs.noop.enqueue_many([((), {})] * 30)
    claims = threading.Semaphore(0)
    locked, released = threading.Event(), threading.Event()

    def holder() -> None:
        # Another claimer's locks on every due row, held until the worker has claimed in vain
        # three times.
        try:
            with transaction.atomic():
                list(Job.objects.select_for_update().filter(status=Status.PENDING))
                locked.set()
                for _ in range(3):
                    if not claims.acquire(timeout=10):
                        return
            released.set()
        finally:
            connection.close()

    def count_claims(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)
        if "SKIP LOCKED" in sql:
            claims.release()
        return result

    thread = threading.Thread(target=holder)
    thread.start()
    assert locked.wait(10)
    worker = Worker(concurrency=1, **FAST, scheduler=False)
    with connection.execute_wrapper(count_claims):
        summary = worker.run(burst=True)
    thread.join(15)
    assert released.is_set()
    assert summary.succeeded == 30
    assert Job.objects.filter(status=Status.SUCCEEDED).count() == 30
