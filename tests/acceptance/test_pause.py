"""A queue paused under running workers: nothing of it starts after the pause commits.

Two worker processes drain a backlog of the ``default`` queue (jobs with a concurrency limit
first in the claim order, so both the limited and the plain claim are exercised). The test
pauses the queue, then reads the database's clock: any claim whose start is after that instant began
after the pause committed, so no job of the queue may carry a later ``started_at`` while the
pause stands. Jobs running at the pause finish; jobs of another queue enqueued after the pause
run, which shows the workers kept claiming; resume lets the rest drain.
"""

from __future__ import annotations

import signal

import pytest
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.db.dbtime import db_now
from django_leasejobs.models import Job, Status

from ..invariants import check_invariants, wait_for
from .conftest import FAST

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.slow,  # .ci/run: each database's pass, not the Django-version or binding passes
    pytest.mark.django_db(transaction=True),
]

PLAIN = 40
LIMITED = 20  # jobs.per_customer: two at once per customer


def test_a_paused_queue_starts_nothing_until_resumed(spawn) -> None:
    ids = [
        j.pk for j in jobs.per_customer.enqueue_many([((n % 4, 0.3), {}) for n in range(LIMITED)])
    ]
    ids += [j.pk for j in jobs.sleep.enqueue_many([((0.3,), {})] * PLAIN)]
    backlog = Job.objects.filter(pk__in=ids)
    workers = [
        spawn("--concurrency", "2", "--queues", "default,other", *FAST, name=f"p{n}")
        for n in range(2)
    ]
    wait_for(
        lambda: (
            backlog.filter(status=Status.SUCCEEDED).count() >= 4
            and backlog.filter(status=Status.RUNNING).exists()
        ),
        what="4 jobs done and more running",
    )
    running = set(backlog.filter(status=Status.RUNNING).values_list("pk", flat=True))
    assert protocol.pause(queue="default", by="test") is not None
    after_pause = db_now()
    waiting = set(backlog.filter(status=Status.PENDING).values_list("pk", flat=True))
    assert waiting, "the backlog drained before the pause: nothing left to hold back"

    others = [j.pk for j in jobs.other_queue.enqueue_many([((), {})] * 5)]
    wait_for(
        lambda: Job.objects.filter(pk__in=others, status=Status.SUCCEEDED).count() == len(others),
        what="the other queue's jobs ran during the pause",
    )
    wait_for(lambda: not backlog.filter(status=Status.RUNNING).exists(), what="running finished")
    assert (
        set(backlog.filter(pk__in=running, status=Status.SUCCEEDED).values_list("pk", flat=True))
        == running
    )
    late = backlog.filter(started_at__gt=after_pause).values_list("pk", "name", "started_at")
    assert list(late) == [], f"started after the pause committed at {after_pause}"
    pending = set(backlog.filter(status=Status.PENDING).values_list("pk", flat=True))
    assert pending >= waiting  # nothing waiting at the pause started during it
    assert backlog.filter(pk__in=waiting, attempt=0).count() == len(waiting)

    before_resume = db_now()
    assert protocol.resume(queue="default", by="test") is not None
    wait_for(
        lambda: backlog.filter(status=Status.SUCCEEDED).count() == len(ids),
        timeout=120,
        what="the rest drained after resume",
    )
    for worker in workers:
        worker.send(signal.SIGTERM)
    for worker in workers:
        assert worker.wait() == 0
    rows = check_invariants([*ids, *others], expected_count=len(ids) + len(others))
    assert {(r.status, r.attempt) for r in rows} == {(Status.SUCCEEDED, 1)}
    resumed = [r for r in rows if r.pk in waiting]
    assert all(r.started_at >= before_resume for r in resumed), before_resume
