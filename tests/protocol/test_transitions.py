"""Every transition, allowed and refused: wrong state, stale attempt, expired lease."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from testapp import jobs
from testapp.models import Hit

from django_leasejobs import protocol
from django_leasejobs.core import job_modules
from django_leasejobs.errors import JobValidationError, StaleAttemptError
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Failure, Outcome
from django_leasejobs.runtime import execution

from ..conftest import fields, shifted

pytestmark = pytest.mark.django_db


def claim_one(worker: str = "w1", **options) -> Job:
    claimed = protocol.claim(worker, batch=1, **options)
    assert len(claimed) == 1, claimed
    return claimed[0]


class TestClaim:
    def test_claim_leases_a_due_job_and_increments_the_token(self) -> None:
        job = jobs.noop.enqueue()
        claimed = claim_one("w1", lease_seconds=30)
        assert claimed.pk == job.pk
        row = fields(job.pk, "status", "attempt", "lease_owner", "lease_expires_at", "started_at")
        assert row["status"] == Status.RUNNING
        assert row["attempt"] == 1 == claimed.attempt
        assert row["lease_owner"] == "w1"
        assert 29 <= (row["lease_expires_at"] - row["started_at"]).total_seconds() <= 31

    def test_a_job_is_not_claimed_before_its_run_at(self, make_due) -> None:
        job = jobs.noop.enqueue(delay=3600)
        assert protocol.claim("w1", batch=10) == []
        make_due(job)
        assert [j.pk for j in protocol.claim("w1", batch=10)] == [job.pk]

    def test_claim_order_is_priority_then_run_at_then_id(self, make_due) -> None:
        low = jobs.noop.enqueue(priority=-5)
        old = jobs.noop.enqueue()
        new = jobs.noop.enqueue()
        high = jobs.noop.enqueue(priority=50)
        make_due(low, old, new, high, seconds_ago=10)
        make_due(old, seconds_ago=20)
        order = [j.pk for j in protocol.claim("w1", batch=10)]
        assert order == [high.pk, old.pk, new.pk, low.pk]

    def test_claim_respects_batch_and_queues(self) -> None:
        for _ in range(5):
            jobs.noop.enqueue()
        other = jobs.other_queue.enqueue()
        assert len(protocol.claim("w1", batch=3, queues=["default"])) == 3
        assert [j.pk for j in protocol.claim("w1", batch=10, queues=["other"])] == [other.pk]
        assert len(protocol.claim("w1", batch=10, queues=["default", "other"])) == 2
        assert protocol.claim("w1", batch=10) == []
        assert protocol.claim("w1", batch=0) == []
        assert protocol.claim("w1", batch=5, queues=[]) == []

    def test_running_and_finished_jobs_are_not_claimed(self) -> None:
        jobs.noop.enqueue()
        job = claim_one()
        assert protocol.claim("w2", batch=10) == []
        protocol.complete(job.pk, job.attempt)
        assert protocol.claim("w2", batch=10) == []

    def test_per_job_lease_overrides_the_worker_lease(self) -> None:
        jobs.short_lease.enqueue()
        claimed = claim_one(lease_seconds=600)
        row = fields(claimed.pk, "lease_expires_at", "started_at")
        assert (row["lease_expires_at"] - row["started_at"]).total_seconds() == pytest.approx(
            5, abs=1
        )


class TestHeartbeat:
    def test_heartbeat_extends_only_current_tokens(self, expire_lease) -> None:
        a, b = jobs.noop.enqueue(), jobs.noop.enqueue()
        ca, cb = protocol.claim("w1", batch=2)
        expire_lease(ca, cb, seconds_ago=-5)  # 5 s left
        lost = protocol.heartbeat(
            "w1", [(ca.pk, ca.attempt), (cb.pk, cb.attempt + 7)], lease_seconds=120
        )
        assert lost == {cb.pk}
        row = fields(ca.pk, "lease_expires_at", "started_at")
        assert (row["lease_expires_at"] - row["started_at"]).total_seconds() > 100
        assert a.pk != b.pk

    def test_heartbeat_of_another_worker_changes_nothing(self) -> None:
        jobs.noop.enqueue()
        job = claim_one("w1")
        before = fields(job.pk, "lease_expires_at")
        assert protocol.heartbeat("intruder", [(job.pk, job.attempt)]) == {job.pk}
        assert fields(job.pk, "lease_expires_at") == before

    def test_empty_heartbeat(self) -> None:
        assert protocol.heartbeat("w1", []) == set()


class TestComplete:
    def test_complete_with_the_current_token(self) -> None:
        jobs.add.enqueue(1, 2)
        job = claim_one()
        assert protocol.complete(job.pk, job.attempt, 3) is Outcome.SUCCEEDED
        row = fields(job.pk, "status", "result", "lease_owner", "lease_expires_at", "finished_at")
        assert row["status"] == Status.SUCCEEDED
        assert row["result"] == 3
        assert row["lease_owner"] == ""
        assert row["lease_expires_at"] is None
        assert row["finished_at"] is not None

    def test_complete_with_a_stale_token_is_refused_and_changes_nothing(self) -> None:
        jobs.noop.enqueue()
        job = claim_one()
        before = fields(job.pk, "status", "attempt", "lease_expires_at", "result")
        assert protocol.complete(job.pk, job.attempt - 1, "stale") is Outcome.STALE
        assert protocol.complete(job.pk, job.attempt + 1, "future") is Outcome.STALE
        assert fields(job.pk, "status", "attempt", "lease_expires_at", "result") == before

    def test_complete_twice_is_refused_the_second_time(self) -> None:
        jobs.noop.enqueue()
        job = claim_one()
        assert protocol.complete(job.pk, job.attempt) is Outcome.SUCCEEDED
        assert protocol.complete(job.pk, job.attempt) is Outcome.STALE
        assert protocol.fail(job.pk, job.attempt, Failure("late")) is Outcome.STALE
        assert fields(job.pk, "status")["status"] == Status.SUCCEEDED

    def test_complete_of_a_pending_job_is_refused(self) -> None:
        job = jobs.noop.enqueue()
        assert protocol.complete(job.pk, 0) is Outcome.STALE
        assert fields(job.pk, "status")["status"] == Status.PENDING

    def test_complete_many_fences_each_row(self) -> None:
        for _ in range(3):
            jobs.noop.enqueue()
        a, b, c = protocol.claim("w1", batch=3)
        outcomes = protocol.complete_many(
            [(a.pk, a.attempt), (b.pk, b.attempt + 1), (c.pk, c.attempt)]
        )
        assert outcomes == {a.pk: Outcome.SUCCEEDED, b.pk: Outcome.STALE, c.pk: Outcome.SUCCEEDED}
        assert fields(b.pk, "status")["status"] == Status.RUNNING
        assert protocol.complete_many([]) == {}

    @pytest.mark.parametrize("job_function", [jobs.returns_object, jobs.returns_undecodable_name])
    def test_unstorable_return_value_dead_letters_the_job(self, job_function: Any) -> None:
        """Never a database error on the worker's write (which it would retry for ever)."""
        job_function.enqueue()
        job = claim_one()
        assert execution.run(job, "w1") is Outcome.DEAD
        assert "Unstorable return value" in DeadLetter.objects.get(job=job).errors[0]["error"]


class TestFailRetryDead:
    def test_fail_schedules_a_retry_with_backoff_from_the_database_clock(self) -> None:
        jobs.add.enqueue(1, 2)
        job = claim_one()
        assert protocol.fail(job.pk, job.attempt, Failure("E: x")) is Outcome.RETRIED
        row = fields(
            job.pk, "status", "run_at", "started_at", "last_error", "errors", "lease_owner"
        )
        assert row["status"] == Status.FAILED
        assert row["last_error"] == "E: x"
        assert row["lease_owner"] == ""
        # default backoff: base 2 s, equal jitter => first retry in [1, 2] s
        delay = (row["run_at"] - row["started_at"]).total_seconds()
        assert 0.9 <= delay <= 3
        assert row["errors"][0]["attempt"] == 1
        assert row["errors"][0]["worker"] == "w1"

    def test_a_failed_job_is_claimed_again_when_due(self, make_due) -> None:
        jobs.noop.enqueue()
        job = claim_one()
        protocol.fail(job.pk, job.attempt, Failure("x"))
        assert protocol.claim("w1", batch=1) == []
        make_due(job)
        assert claim_one().attempt == 2

    def test_a_job_that_always_fails_is_dead_after_exactly_max_attempts(self, make_due) -> None:
        job = jobs.always_fails.enqueue()
        outcomes = []
        for _ in range(10):
            make_due(job)
            claimed = protocol.claim("w1", batch=1)
            if not claimed:
                break
            outcomes.append(execution.run(claimed[0], "w1"))
        assert outcomes == [Outcome.RETRIED, Outcome.RETRIED, Outcome.DEAD]
        row = Job.objects.get(pk=job.pk)
        assert (row.status, row.attempt, row.max_attempts) == (Status.DEAD, 3, 3)
        letter = DeadLetter.objects.get(job=job)
        assert letter.reason == "attempts exhausted"
        assert [e["error"] for e in letter.errors] == [
            f"RuntimeError: boom on attempt {n}" for n in (1, 2, 3)
        ]
        assert "Traceback" in letter.errors[0]["traceback"]
        assert (letter.name, letter.args, letter.queue) == (row.name, [], "default")

    def test_a_job_whose_lease_expires_every_time_reaches_dead(
        self, make_due, expire_lease
    ) -> None:
        job = jobs.noop.enqueue(max_attempts=3)
        outcomes = []
        for _ in range(10):
            make_due(job)
            claimed = protocol.claim("w1", batch=1)
            if not claimed:
                break
            expire_lease(claimed[0])
            outcomes.extend(protocol.recover_expired().values())
        assert outcomes == [Outcome.RETRIED, Outcome.RETRIED, Outcome.DEAD]
        row = Job.objects.get(pk=job.pk)
        assert (row.status, row.attempt) == (Status.DEAD, 3)
        letter = DeadLetter.objects.get(job=job)
        assert {e["kind"] for e in letter.errors} == {"lease expired"}

    def test_a_reclaimed_job_is_pushed_back_by_its_backoff(self, expire_lease) -> None:
        jobs.noop.enqueue()
        job = claim_one()
        expire_lease(job)
        protocol.recover_expired()
        assert fields(job.pk, "status")["status"] == Status.FAILED
        assert protocol.claim("w2", batch=1) == []

    def test_recovery_leaves_a_live_lease_alone(self, expire_lease) -> None:
        jobs.noop.enqueue()
        job = claim_one()
        assert protocol.recover_expired() == {}
        assert fields(job.pk, "status")["status"] == Status.RUNNING

    def test_permanent_error_dead_letters_at_once(self) -> None:
        jobs.permanent.enqueue()
        job = claim_one()
        assert execution.run(job, "w1") is Outcome.DEAD
        assert DeadLetter.objects.get(job=job).reason == "permanent error"
        jobs.missing_key.enqueue()
        assert execution.run(claim_one(), "w1") is Outcome.DEAD

    def test_an_unregistered_name_is_never_called_and_waits_then_dies_after_the_grace(
        self, settings
    ) -> None:
        settings.LEASEJOBS_UNKNOWN_JOB_GRACE = "1h"
        Job.objects.create(name="os.system", args=["echo pwned"])
        job = claim_one()
        assert execution.run(job, "w1") is Outcome.RELEASED
        assert not DeadLetter.objects.exists()
        row = fields(job.pk, "status", "deferrals", "first_deferred_at")
        assert row["status"] == Status.PENDING
        assert row["deferrals"] == 1
        Job.objects.filter(pk=job.pk).update(run_at=shifted(-1), first_deferred_at=shifted(-3601))
        job = claim_one()
        assert execution.run(job, "w1") is Outcome.DEAD
        letter = DeadLetter.objects.get(job=job)
        assert letter.reason == "unregistered job"
        assert letter.errors[-1]["error"] == (
            "No job is registered as 'os.system'; it was not run: its module 'os' is outside "
            "the installed apps' packages and LEASEJOBS_TASK_MODULES; nothing was imported. "
            "No worker that can run it claimed it within LEASEJOBS_UNKNOWN_JOB_GRACE (1:00:00) "
            "of its first deferral: deploy workers whose code registers this job (or whose "
            f"allow-list imports its module), then replay it. {job_modules.JOB_ADVICE}"
        )

    def test_a_job_in_an_allowed_module_not_yet_imported_is_imported_and_run(
        self, settings, late_jobs: str
    ) -> None:
        settings.LEASEJOBS_TASK_MODULES = [late_jobs]
        job = Job.objects.create(name=f"{late_jobs}.late_report", args=["monday"])
        assert execution.run(claim_one(), "w1") is Outcome.SUCCEEDED
        assert fields(job.pk, "result") == {"result": "report for monday"}

    def test_the_log_line_of_an_unknown_job_keeps_what_to_do(self, caplog, settings) -> None:
        settings.LEASEJOBS_UNKNOWN_JOB_GRACE = "0s"
        name = "gone." + "x" * 190  # the error's text is longer than a log line shows
        Job.objects.create(name=name)
        with caplog.at_level("WARNING", logger="django_leasejobs"):
            assert execution.run(claim_one(), "w1") is Outcome.DEAD
        (line,) = [r.getMessage() for r in caplog.records if "job.dead" in r.getMessage()]
        error = Job.objects.get(name=name).last_error
        assert error.endswith(job_modules.JOB_ADVICE)
        assert error not in line  # shortened, but not by what to do
        assert line.endswith(f" {job_modules.JOB_ADVICE}")

    def test_fail_with_a_stale_token_changes_nothing(self) -> None:
        jobs.noop.enqueue()
        job = claim_one()
        assert protocol.fail(job.pk, job.attempt + 1, Failure("x")) is Outcome.STALE
        assert fields(job.pk, "status", "errors") == {"status": Status.RUNNING, "errors": []}

    def test_flaky_job_succeeds_on_its_third_attempt(self, make_due) -> None:
        job = jobs.flaky.enqueue()
        outcomes = []
        while True:
            make_due(job)
            claimed = protocol.claim("w1", batch=1)
            if not claimed:
                break
            outcomes.append(execution.run(claimed[0], "w1"))
        assert outcomes == [Outcome.RETRIED, Outcome.RETRIED, Outcome.SUCCEEDED]
        assert fields(job.pk, "result")["result"] == "ok on attempt 3"


class TestRelease:
    def test_release_is_free_of_charge_but_the_token_still_grows(self) -> None:
        job = jobs.noop.enqueue(max_attempts=1)
        first = claim_one()
        assert protocol.release(first.pk, first.attempt) is Outcome.RELEASED
        row = Job.objects.get(pk=job.pk)
        assert (row.status, row.released, row.attempt) == (Status.PENDING, 1, 1)
        second = claim_one("w2")
        assert second.attempt == 2
        # the release was not charged: one failure still ends the budget of 1
        assert protocol.fail(second.pk, second.attempt, Failure("x")) is Outcome.DEAD
        assert protocol.release(first.pk, first.attempt) is Outcome.STALE


class TestOperatorActions:
    def test_cancel_pending_and_failed_at_once_and_running_by_request(self) -> None:
        pending = jobs.noop.enqueue()
        assert protocol.cancel(pending.pk)
        assert fields(pending.pk, "status")["status"] == Status.CANCELLED
        assert not protocol.cancel(pending.pk)
        jobs.noop.enqueue()
        running = claim_one()
        protocol.fail(running.pk, running.attempt, Failure("x"))
        assert protocol.cancel(running.pk)
        assert fields(running.pk, "status")["status"] == Status.CANCELLED
        jobs.noop.enqueue()
        running = claim_one()
        assert protocol.cancel(running.pk)  # requested: test_cancel_running.py has the rest
        assert fields(running.pk, "status")["status"] == Status.RUNNING

    def test_a_cancelled_job_is_never_claimed_and_its_stale_worker_cannot_write(self) -> None:
        jobs.noop.enqueue()
        job = claim_one()
        protocol.fail(job.pk, job.attempt, Failure("x"))
        protocol.cancel(job.pk)
        assert protocol.complete(job.pk, job.attempt) is Outcome.STALE
        assert fields(job.pk, "status")["status"] == Status.CANCELLED

    def test_run_now(self) -> None:
        job = jobs.noop.enqueue(delay=3600)
        assert protocol.run_now(job.pk)
        assert claim_one().pk == job.pk
        assert not protocol.run_now(job.pk)


class TestReplay:
    def dead_job(self, make_due) -> DeadLetter:
        job = jobs.always_fails.enqueue(max_attempts=1)
        make_due(job)
        assert execution.run(claim_one(), "w1") is Outcome.DEAD
        return DeadLetter.objects.get(job=job)

    def test_replay_makes_one_new_job_with_a_fresh_budget(self, make_due) -> None:
        letter = self.dead_job(make_due)
        new = protocol.replay(letter.pk)
        again = protocol.replay(letter.pk)
        assert new.pk == again.pk != letter.job_id
        assert (new.status, new.attempt, new.max_attempts) == (Status.PENDING, 0, 1)
        letter.refresh_from_db()
        assert letter.replayed_job_id == new.pk
        assert letter.replayed_at is not None
        assert Job.objects.get(pk=letter.job_id).status == Status.DEAD
        assert Job.objects.count() == 2

    def test_replay_with_edited_arguments_is_validated(self, make_due) -> None:
        letter = self.dead_job(make_due)
        with pytest.raises(JobValidationError, match="NaN"):
            protocol.replay(letter.pk, args=[float("nan")])
        letter.refresh_from_db()
        assert letter.replayed_job_id is None
        new = protocol.replay(letter.pk, kwargs={})
        assert new.kwargs == {}

    def test_replay_finds_the_job_as_a_worker_does(self, settings, late_jobs: str) -> None:
        """This process never imported the job's module: the replay imports it, as the worker
        that runs the new job will, once the allow-list has it."""
        settings.LEASEJOBS_UNKNOWN_JOB_GRACE = "0s"  # dead at once, to be replayed
        Job.objects.create(name=f"{late_jobs}.late_report", args=["monday"])
        assert execution.run(claim_one(), "w1") is Outcome.DEAD  # not allowed yet
        settings.LEASEJOBS_TASK_MODULES = [late_jobs]  # the fix, deployed
        protocol.replay(DeadLetter.objects.get().pk)
        assert execution.run(claim_one(), "w1") is Outcome.SUCCEEDED

    def test_stale_worker_of_the_dead_job_cannot_touch_it_after_replay(self, make_due) -> None:
        letter = self.dead_job(make_due)
        protocol.replay(letter.pk)
        dead = Job.objects.get(pk=letter.job_id)
        assert protocol.complete(dead.pk, dead.attempt) is Outcome.STALE
        assert Job.objects.get(pk=dead.pk).status == Status.DEAD


class TestHandlerContext:
    def test_first_time_records_an_effect_once(self, make_due) -> None:
        job = jobs.effect_once.enqueue("invoice-7")
        execution.run(claim_one(), "w1")
        second = jobs.effect_once.enqueue("invoice-7")
        execution.run(claim_one(), "w1")
        assert Hit.objects.filter(label="invoice-7").count() == 1
        assert Job.objects.get(pk=second.pk).status == Status.SUCCEEDED
        assert job.pk != second.pk

    @pytest.mark.django_db(transaction=True)
    def test_first_time_and_complete_outside_a_transaction_are_errors(self) -> None:
        with pytest.raises(RuntimeError, match=r"inside transaction\.atomic"):
            protocol.record_effect("k")
        with pytest.raises(RuntimeError, match=r"inside transaction\.atomic"):
            protocol.complete_in_transaction(1, 1)

    def test_complete_in_the_handlers_transaction(self) -> None:
        jobs.exactly_once.enqueue("paid")
        job = claim_one()
        assert execution.run(job, "w1") is Outcome.SUCCEEDED
        assert fields(job.pk, "status", "result") == {"status": Status.SUCCEEDED, "result": "done"}
        assert Hit.objects.filter(label="paid").count() == 1

    def test_complete_in_transaction_with_a_lost_lease_rolls_back_the_handlers_writes(
        self, expire_lease
    ) -> None:
        jobs.exactly_once.enqueue("paid-twice")
        job = claim_one()
        expire_lease(job)
        protocol.recover_expired()
        with pytest.raises(StaleAttemptError), transaction.atomic():
            Hit.objects.create(label="paid-twice")
            protocol.complete_in_transaction(job.pk, job.attempt)
        assert Hit.objects.filter(label="paid-twice").count() == 0


def test_a_zero_backoff_retry_is_due_at_once_on_every_database() -> None:
    """SQLite's clock has milliseconds, stored times microseconds: both must compare as times."""
    for _ in range(20):
        job = jobs.always_fails.enqueue(max_attempts=2)
        first = claim_one()
        assert protocol.fail(first.pk, first.attempt, Failure("x")) is Outcome.RETRIED
        second = claim_one()
        assert (second.pk, second.attempt) == (job.pk, 2)
        row = fields(job.pk, "run_at", "started_at")
        assert row["started_at"] >= row["run_at"]
        assert protocol.fail(second.pk, second.attempt, Failure("x")) is Outcome.DEAD


class TestClaimAcrossQueues:
    """Several queues or all of them: the claim order is global, not per queue."""

    def test_every_queue_in_priority_order(self, make_due) -> None:
        low = jobs.noop.enqueue(queue="a", priority=-1)
        high = jobs.noop.enqueue(queue="b", priority=9)
        mid = jobs.noop.enqueue(queue="c", priority=3)
        later = jobs.noop.enqueue(queue="d", priority=50, delay=3600)
        make_due(low, high, mid)
        assert [j.pk for j in protocol.claim("w1", batch=2)] == [high.pk, mid.pk]
        assert [j.pk for j in protocol.claim("w1", batch=5)] == [low.pk]
        assert fields(later.pk, "status")["status"] == Status.PENDING

    def test_given_queues_only_and_the_batch_holds_across_them(self) -> None:
        for queue in ("a", "a", "b", "b", "c"):
            jobs.noop.enqueue(queue=queue)
        claimed = protocol.claim("w1", batch=3, queues=["a", "b"])
        assert len(claimed) == 3
        assert {j.queue for j in claimed} <= {"a", "b"}
        assert len(protocol.claim("w1", batch=10, queues=["a", "b", "missing"])) == 1
        assert [j.queue for j in protocol.claim("w1", batch=10)] == ["c"]
