"""``cancel_many``: a batch of jobs cancelled (waiting) or asked to cancel (running) at once.

The bulk form of ``request_cancel``: each id ends up in exactly one of cancelled, requested or
left, and what it did to each row is what ``request_cancel`` would have done.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from testapp import jobs

from django_leasejobs import protocol, signals
from django_leasejobs.models import Job, Status
from django_leasejobs.protocol import Failure, Outcome

from ..conftest import fields, shifted

pytestmark = pytest.mark.django_db


def claimed(worker: str = "w1") -> Job:
    job = jobs.noop.enqueue()
    Job.objects.filter(pk=job.pk).update(run_at=shifted(-1))
    (taken,) = protocol.claim(worker, batch=1)
    return taken


def failed() -> Job:
    job = claimed()
    protocol.fail(job.pk, job.attempt, Failure("OSError: down"))
    assert fields(job.pk, "status")["status"] == Status.FAILED
    return job


def test_each_id_is_cancelled_requested_or_left_as_its_state_allows() -> None:
    running = claimed()
    pending = jobs.noop.enqueue(delay=3600)
    waiting_retry = failed()
    asked = claimed("w2")
    protocol.request_cancel(asked.pk)
    done = claimed("w3")
    assert protocol.complete(done.pk, done.attempt) is Outcome.SUCCEEDED
    ids = [pending.pk, running.pk, waiting_retry.pk, asked.pk, done.pk, 10**9]

    result = protocol.cancel_many(ids)

    assert sorted(result.cancelled) == sorted([pending.pk, waiting_retry.pk])
    assert result.requested == [running.pk]
    assert result.left == [asked.pk, done.pk, 10**9]
    for pk in (pending.pk, waiting_retry.pk):
        row = fields(pk, "status", "finished_at", "lease_owner", "live_dedupe_key")
        assert row["status"] == Status.CANCELLED
        assert row["finished_at"] is not None
        assert (row["lease_owner"], row["live_dedupe_key"]) == ("", None)
    row = fields(running.pk, "status", "cancel_requested_at", "lease_owner")
    assert row["status"] == Status.RUNNING
    assert row["cancel_requested_at"] is not None
    assert row["lease_owner"] == "w1"
    assert fields(done.pk, "status")["status"] == Status.SUCCEEDED


def test_a_requested_job_is_ended_by_its_worker_with_its_token() -> None:
    running = claimed()
    assert protocol.cancel_many([running.pk]).requested == [running.pk]
    assert protocol.cancel_attempt(running.pk, running.attempt) is Outcome.CANCELLED
    assert fields(running.pk, "status")["status"] == Status.CANCELLED


def test_a_second_call_changes_nothing() -> None:
    pending = jobs.noop.enqueue(delay=3600)
    running = claimed()
    protocol.cancel_many([pending.pk, running.pk])
    again = protocol.cancel_many([pending.pk, running.pk])
    assert (again.cancelled, again.requested) == ([], [])
    assert again.left == [pending.pk, running.pk]


def test_the_dedupe_key_is_free_again() -> None:
    job = jobs.noop.using(dedupe_key="k").enqueue()
    protocol.cancel_many([job.pk])
    again = jobs.noop.using(dedupe_key="k").enqueue()
    assert again.pk != job.pk


def test_one_batch_is_a_fixed_number_of_statements() -> None:
    """Not one round of statements per job: a batch of 50 costs what a batch of 2 does."""
    few = [jobs.noop.enqueue(delay=3600).pk for _ in range(2)]
    many = [job.pk for job in jobs.noop.enqueue_many([((), {})] * 50)]

    with CaptureQueriesContext(connection) as two:
        protocol.cancel_many(few)
    with CaptureQueriesContext(connection) as fifty:
        protocol.cancel_many(many)
    assert len(fifty.captured_queries) == len(two.captured_queries)


def test_cancelled_jobs_send_job_cancelled(django_capture_on_commit_callbacks) -> None:
    heard: list[int] = []

    def receiver(sender, job_id, **kwargs) -> None:
        heard.append(job_id)

    pending = jobs.noop.enqueue(delay=3600)
    running = claimed()
    signals.job_cancelled.connect(receiver)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            protocol.cancel_many([pending.pk, running.pk])
    finally:
        signals.job_cancelled.disconnect(receiver)
    assert heard == [pending.pk]


def test_a_workflow_job_cancelled_ends_its_step_as_one_cancelled_alone_does() -> None:
    from testapp import workflow_jobs as w

    from django_leasejobs import chain
    from django_leasejobs.models import WorkflowRun, WorkflowStep

    def cancelled_by(cancel) -> tuple[list[str], str]:
        run = chain(w.tick.si("first"), w.tick.si("second")).enqueue()
        first = WorkflowStep.objects.filter(run=run, job__isnull=False).get()
        cancel(first.job_id)
        states = list(WorkflowStep.objects.filter(run=run).order_by("pk").values_list("state"))
        return [state for (state,) in states], WorkflowRun.objects.get(pk=run.pk).status

    alone = cancelled_by(protocol.request_cancel)
    assert alone[0] == ["cancelled", "cancelled"]
    assert cancelled_by(lambda pk: protocol.cancel_many([pk])) == alone
