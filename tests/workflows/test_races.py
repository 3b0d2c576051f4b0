"""Members finishing at the same moment on their own connections: the callback is released
exactly once, and the run's counters count each member once."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.db import connection
from testapp import workflow_jobs as w

from django_leasejobs import group, protocol
from django_leasejobs.models import Job, Status

from ..conftest import race
from .helpers import counters, states

pytestmark = pytest.mark.django_db(transaction=True)

MEMBERS = 8


def _finish(job: Job, how: str) -> Callable[[], protocol.Outcome]:
    def call() -> protocol.Outcome:
        n = job.args[0]
        if how == "complete":
            return protocol.complete(job.pk, job.attempt, n * n)
        if how == "many":
            return protocol.complete_many([(job.pk, job.attempt, n * n)])[job.pk]
        return protocol.fail(job.pk, job.attempt, protocol.Failure("x"), retryable=False)

    return call


def _skip_sqlite() -> None:
    if connection.vendor == "sqlite":
        pytest.skip("SQLite has one writer: concurrent finishes are serialised by it")


@pytest.mark.parametrize("how", ["complete", "many"])
def test_members_finishing_together_release_the_callback_once(how: str) -> None:
    _skip_sqlite()
    for _ in range(3):  # several rounds: each one a fresh race
        run = group(w.square.s(i) for i in range(MEMBERS)).then(w.total.s()).enqueue()
        claimed = protocol.claim("w1", batch=MEMBERS)
        assert len(claimed) == MEMBERS
        outcomes = race(*(_finish(job, how) for job in claimed))
        assert set(outcomes) == {protocol.Outcome.SUCCEEDED}
        callback = Job.objects.filter(workflow_step__run=run, name=w.total.name)
        assert callback.count() == 1
        assert callback.get().args == [[i * i for i in range(MEMBERS)]]
        assert counters(run) == ("running", MEMBERS + 1, MEMBERS, MEMBERS, 0, 0)
        Job.objects.filter(status=Status.PENDING).update(status=Status.CANCELLED)


def test_members_failing_together_cancel_the_callback_once() -> None:
    _skip_sqlite()
    run = group(w.square.s(i) for i in range(MEMBERS)).then(w.total.s()).enqueue()
    claimed = protocol.claim("w1", batch=MEMBERS)
    outcomes = race(*(_finish(job, "fail") for job in claimed))
    assert set(outcomes) == {protocol.Outcome.DEAD}
    assert states(run)["total"] == "cancelled"
    assert counters(run) == ("failed", MEMBERS + 1, MEMBERS + 1, 0, MEMBERS, 1)
    assert not Job.objects.filter(name=w.total.name).exists()


def test_a_member_finishing_while_a_run_is_cancelled_ends_it_once() -> None:
    _skip_sqlite()
    from django_leasejobs import workflows

    run = group(w.square.s(i) for i in range(MEMBERS)).then(w.total.s()).enqueue()
    claimed = protocol.claim("w1", batch=MEMBERS)
    race(*(_finish(job, "complete") for job in claimed), lambda: workflows.cancel(run.pk))
    status, total, finished, succeeded, failed, cancelled = counters(run)
    # Whichever came first, the callback never runs and the run ends cancelled, counted once.
    assert (status, total, finished, failed) == ("cancelled", MEMBERS + 1, MEMBERS + 1, 0)
    assert succeeded + cancelled == MEMBERS + 1
    assert states(run)["total"] == "cancelled"
    assert not Job.objects.filter(name=w.total.name).exclude(status=Status.CANCELLED).exists()
