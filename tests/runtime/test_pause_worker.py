"""A paused queue never starts a job after the pause commits, with workers claiming throughout.

Two in-process workers drain two queues while a producer keeps both fed; the test pauses one
queue, reads the database's clock once the pause has committed, and checks that no job of that
queue has a ``started_at`` after it, while the other queue kept starting jobs.
"""

from __future__ import annotations

import threading

import pytest
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.db.dbtime import db_now
from django_leasejobs.models import Job, Status
from django_leasejobs.runtime.worker import Worker

from ..invariants import wait_for
from .test_worker import Background

pytestmark = pytest.mark.django_db(transaction=True)

FAST = {"lease": 5.0, "heartbeat": 0.1, "poll": 0.02}


def _started_after(queue: str, when: object) -> int:
    return Job.objects.filter(queue=queue, started_at__gt=when).count()


def test_no_job_of_a_paused_queue_starts_after_the_pause_commits() -> None:
    stop = threading.Event()

    def produce() -> None:
        from django.db import connection

        try:
            while not stop.is_set():
                jobs.noop.enqueue_many([{"queue": "held"}, {"queue": "free"}] * 5)
                stop.wait(0.01)
        finally:
            connection.close()

    producer = threading.Thread(target=produce, daemon=True)
    workers = [
        Worker(["held", "free"], concurrency=2, batch=4, worker_id=f"w{i}", scheduler=False, **FAST)
        for i in range(2)
    ]
    with Background(workers[0]), Background(workers[1]):
        producer.start()
        try:
            wait_for(lambda: Job.objects.filter(queue="held", status=Status.SUCCEEDED).count() > 20)
            assert protocol.pause(queue="held", by="test") is not None
            committed = db_now()
            wait_for(lambda: _started_after("free", committed) > 50, what="free queue runs on")
        finally:
            stop.set()
            producer.join(timeout=30)
    assert _started_after("held", committed) == 0
    assert Job.objects.filter(queue="held", status=Status.PENDING).exists()
    # Jobs running when the pause committed finished: none is left running.
    assert not Job.objects.filter(queue="held", status=Status.RUNNING).exists()
    assert protocol.resume(queue="held") is not None
    assert protocol.claim("after", queues=["held"], batch=1), "resumed: claimable again"
