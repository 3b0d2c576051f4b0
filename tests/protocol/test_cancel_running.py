"""Cancelling a running job: the request on the row, the worker's fenced write, and the races.

An operator never writes ``cancelled`` over a running attempt; it records the request, and the
attempt's own token ends it. Every other end of a requested attempt (an error, a timeout, a
lost lease, a release) ends the job cancelled too, never retried.
"""

from __future__ import annotations

from collections import Counter

import pytest
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Cancel, Failure, Outcome

from ..conftest import fields, race, shifted

pytestmark = pytest.mark.django_db


def claimed(worker: str = "w1") -> Job:
    jobs.noop.enqueue()
    (job,) = protocol.claim(worker, batch=1)
    return job


class TestRequest:
    def test_a_waiting_job_is_cancelled_at_once_and_a_running_one_only_requested(self) -> None:
        waiting = jobs.noop.enqueue(delay=3600)
        assert protocol.request_cancel(waiting.pk) is Cancel.CANCELLED
        running = claimed()
        assert protocol.request_cancel(running.pk) is Cancel.REQUESTED
        row = fields(running.pk, "status", "cancel_requested_at", "lease_owner", "finished_at")
        assert row["status"] == Status.RUNNING
        assert row["cancel_requested_at"] is not None
        assert (row["lease_owner"], row["finished_at"]) == ("w1", None)

    def test_a_second_request_keeps_the_first_time_and_still_says_requested(self) -> None:
        job = claimed()
        protocol.request_cancel(job.pk)
        Job.objects.filter(pk=job.pk).update(cancel_requested_at=shifted(-60))
        first = fields(job.pk, "cancel_requested_at")["cancel_requested_at"]
        assert protocol.request_cancel(job.pk) is Cancel.REQUESTED
        assert fields(job.pk, "cancel_requested_at")["cancel_requested_at"] == first

    def test_finished_and_missing_jobs_are_refused(self) -> None:
        job = claimed()
        assert protocol.complete(job.pk, job.attempt) is Outcome.SUCCEEDED
        assert protocol.request_cancel(job.pk) is Cancel.REFUSED
        assert protocol.request_cancel(10**9) is Cancel.REFUSED
        assert fields(job.pk, "status", "cancel_requested_at") == {
            "status": Status.SUCCEEDED,
            "cancel_requested_at": None,
        }

    def test_cancel_is_true_for_cancelled_and_requested_false_for_refused(self) -> None:
        waiting = jobs.noop.enqueue(delay=3600)
        running = claimed()
        assert protocol.cancel(waiting.pk) is True
        assert protocol.cancel(running.pk) is True
        assert protocol.cancel(waiting.pk) is False

    def test_the_heartbeat_returns_the_request_to_the_owner_only(self) -> None:
        job = claimed()
        assert protocol.renew("w1", [(job.pk, job.attempt)]).cancel_requested == set()
        protocol.request_cancel(job.pk)
        renewal = protocol.renew("w1", [(job.pk, job.attempt)])
        assert renewal == protocol.Renewal(lost=set(), cancel_requested={job.pk})
        assert protocol.renew("w2", [(job.pk, job.attempt)]).lost == {job.pk}


class TestCancelAttempt:
    def test_the_token_ends_a_requested_attempt_as_cancelled(self) -> None:
        job = claimed()
        protocol.request_cancel(job.pk)
        assert protocol.cancel_attempt(job.pk, job.attempt) is Outcome.CANCELLED
        row = fields(job.pk, "status", "lease_owner", "lease_expires_at", "finished_at")
        assert row["status"] == Status.CANCELLED
        assert (row["lease_owner"], row["lease_expires_at"]) == ("", None)
        assert row["finished_at"] is not None
        assert protocol.complete(job.pk, job.attempt) is Outcome.STALE
        assert protocol.cancel_attempt(job.pk, job.attempt) is Outcome.STALE

    def test_no_request_or_a_stale_token_changes_nothing(self) -> None:
        job = claimed()
        assert protocol.cancel_attempt(job.pk, job.attempt) is Outcome.STALE
        protocol.request_cancel(job.pk)
        assert protocol.cancel_attempt(job.pk, job.attempt + 1) is Outcome.STALE
        assert fields(job.pk, "status")["status"] == Status.RUNNING

    def test_a_requested_job_that_fails_is_cancelled_not_retried(self) -> None:
        job = claimed()
        protocol.request_cancel(job.pk)
        outcome = protocol.fail(job.pk, job.attempt, Failure("boom", kind="timeout"))
        assert outcome is Outcome.CANCELLED
        row = fields(job.pk, "status", "last_error", "errors")
        assert (row["status"], row["last_error"]) == (Status.CANCELLED, "boom")
        assert [e["kind"] for e in row["errors"]] == ["timeout"]
        assert not DeadLetter.objects.exists()

    def test_a_requested_job_whose_worker_died_is_cancelled_by_recovery(self) -> None:
        job = claimed()
        protocol.request_cancel(job.pk)
        Job.objects.filter(pk=job.pk).update(lease_expires_at=shifted(-1))
        assert protocol.recover_expired() == {job.pk: Outcome.CANCELLED}
        assert fields(job.pk, "status")["status"] == Status.CANCELLED

    def test_a_requested_job_is_not_handed_back_by_a_release(self) -> None:
        job = claimed()
        protocol.request_cancel(job.pk)
        assert protocol.release(job.pk, job.attempt) is Outcome.CANCELLED
        assert fields(job.pk, "status", "released") == {"status": Status.CANCELLED, "released": 0}
        assert protocol.release(job.pk, job.attempt) is Outcome.STALE


@pytest.mark.django_db(transaction=True)
class TestRaces:
    ROUNDS = 40

    def test_cancel_racing_complete_ends_the_job_exactly_once(self) -> None:
        verdicts: Counter[str] = Counter()
        for _ in range(self.ROUNDS):
            job = claimed()
            protocol.request_cancel(job.pk)
            completed, cancelled = race(
                lambda job=job: protocol.complete(job.pk, job.attempt, "done"),
                lambda job=job: protocol.cancel_attempt(job.pk, job.attempt),
            )
            row = fields(job.pk, "status", "result")
            assert sorted([completed.value, cancelled.value]) == sorted(
                [row["status"], Outcome.STALE.value]
            )
            if completed is Outcome.SUCCEEDED:
                assert row == {"status": Status.SUCCEEDED, "result": "done"}
            else:
                assert row == {"status": Status.CANCELLED, "result": None}
            verdicts[row["status"]] += 1
        assert sum(verdicts.values()) == self.ROUNDS

    def test_a_request_racing_complete_leaves_one_final_state(self) -> None:
        """The operator's request and the worker's completion: the job ends succeeded, or its
        request stands and the worker's cancel ends it; never both, never neither."""
        for _ in range(self.ROUNDS):
            job = claimed()
            asked, completed = race(
                lambda job=job: protocol.request_cancel(job.pk),
                lambda job=job: protocol.complete(job.pk, job.attempt),
            )
            assert completed is Outcome.SUCCEEDED  # a request never takes the job from its token
            assert asked in (Cancel.REQUESTED, Cancel.REFUSED)
            assert protocol.cancel_attempt(job.pk, job.attempt) is Outcome.STALE
            assert fields(job.pk, "status")["status"] == Status.SUCCEEDED
