"""A handler's own retry time (``fail(when=...)``) and its snooze (``protocol.snooze``).

Each write is guarded by the attempt token: a stale one changes no row. A snooze leaves the
token to grow on the next claim and charges nothing (``released``), up to the snooze cap.
"""

from __future__ import annotations

import datetime as dt

import pytest
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.db.dbtime import db_now
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Failure, Outcome

from ..conftest import fields
from ..invariants import check_invariants

pytestmark = pytest.mark.django_db

EVERY = [f.attname for f in Job._meta.concrete_fields]
ASKED = Failure("Retry: the handler asked to retry in 30 s", kind="retry requested")


def claim_one(worker: str = "w1") -> Job:
    (claimed,) = protocol.claim(worker, batch=1)
    return claimed


def whole_row(job_id: int) -> dict:
    return Job.objects.filter(pk=job_id).values(*EVERY).get()


def seconds_from_now(value: dt.datetime) -> float:
    return (value - db_now()).total_seconds()


class TestRetryAt:
    def test_after_seconds_sets_run_at_from_the_database_clock_without_jitter(self) -> None:
        jobs.noop.enqueue(max_attempts=3)
        job = claim_one()
        assert protocol.fail(job.pk, job.attempt, ASKED, when=30.0) is Outcome.RETRIED
        row = fields(job.pk, "status", "run_at", "retried_at", "errors", "lease_owner")
        assert row["status"] == Status.FAILED
        assert (row["run_at"] - row["retried_at"]).total_seconds() == pytest.approx(30, abs=0.01)
        assert row["lease_owner"] == ""
        assert [(e["attempt"], e["kind"]) for e in row["errors"]] == [(1, "retry requested")]

    def test_at_a_moment_sets_run_at_to_it(self) -> None:
        jobs.noop.enqueue(max_attempts=3)
        job = claim_one()
        moment = (db_now() + dt.timedelta(hours=2)).replace(microsecond=0)
        assert protocol.fail(job.pk, job.attempt, ASKED, when=moment) is Outcome.RETRIED
        assert fields(job.pk, "run_at")["run_at"] == moment

    def test_a_moment_in_the_past_is_due_at_once(self) -> None:
        jobs.noop.enqueue(max_attempts=3)
        job = claim_one()
        moment = db_now() - dt.timedelta(days=1)
        assert protocol.fail(job.pk, job.attempt, ASKED, when=moment) is Outcome.RETRIED
        assert claim_one("w2").attempt == 2

    def test_on_the_last_attempt_the_job_is_dead_with_attempts_exhausted(self) -> None:
        jobs.noop.enqueue(max_attempts=1)
        job = claim_one()
        assert protocol.fail(job.pk, job.attempt, ASKED, when=30.0) is Outcome.DEAD
        letter = DeadLetter.objects.get(job_id=job.pk)
        assert letter.reason == "attempts exhausted"
        assert [e["kind"] for e in letter.errors] == ["retry requested"]
        assert "asked to retry" in letter.errors[0]["error"]

    def test_a_stale_token_changes_no_row(self) -> None:
        jobs.noop.enqueue(max_attempts=3)
        job = claim_one()
        before = whole_row(job.pk)
        for token in (job.attempt - 1, job.attempt + 1):
            assert protocol.fail(job.pk, token, ASKED, when=30.0) is Outcome.STALE
            assert protocol.fail(job.pk, token, ASKED, when=db_now()) is Outcome.STALE
        assert whole_row(job.pk) == before


class TestSnooze:
    def test_snooze_makes_the_job_pending_later_without_charging_the_attempt(self) -> None:
        jobs.noop.enqueue(max_attempts=1)
        job = claim_one()
        outcome = protocol.snooze(job.pk, job.attempt, 60.0, max_snoozes=5)
        assert outcome is Outcome.SNOOZED
        row = whole_row(job.pk)
        assert row["status"] == Status.PENDING
        assert seconds_from_now(row["run_at"]) == pytest.approx(60, abs=5)
        assert (row["attempt"], row["released"], row["snoozes"]) == (1, 1, 1)
        assert (row["lease_owner"], row["lease_expires_at"]) == ("", None)
        assert (row["errors"], row["last_error"], row["max_attempts"]) == ([], "", 1)

    def test_the_next_claim_still_raises_the_token(self, make_due) -> None:
        jobs.noop.enqueue(max_attempts=1)
        first = claim_one()
        protocol.snooze(first.pk, first.attempt, 3600.0, max_snoozes=5)
        assert protocol.claim("w2", batch=1) == []  # not before its time
        make_due(first)
        second = claim_one("w2")
        assert second.attempt == first.attempt + 1
        # The snoozed attempt's worker can write nothing now, not even another snooze.
        before = whole_row(first.pk)
        assert protocol.snooze(first.pk, first.attempt, 0.0, max_snoozes=5) is Outcome.STALE
        assert protocol.fail(first.pk, first.attempt, ASKED, when=0.0) is Outcome.STALE
        assert protocol.complete(first.pk, first.attempt) is Outcome.STALE
        assert whole_row(first.pk) == before
        # One attempt in the budget, and it is still there for the run after the snooze.
        assert protocol.complete(second.pk, second.attempt) is Outcome.SUCCEEDED
        check_invariants([first.pk])

    def test_a_stale_token_changes_no_row(self) -> None:
        jobs.noop.enqueue()
        job = claim_one()
        before = whole_row(job.pk)
        for token in (job.attempt - 1, job.attempt + 1):
            assert protocol.snooze(job.pk, token, 30.0, max_snoozes=5) is Outcome.STALE
        assert whole_row(job.pk) == before

    def test_a_snooze_after_lease_recovery_changes_no_row(self, expire_lease) -> None:
        jobs.noop.enqueue(max_attempts=3)
        job = claim_one()
        expire_lease(job)
        assert protocol.recover_expired()[job.pk] is Outcome.RETRIED
        before = whole_row(job.pk)
        assert protocol.snooze(job.pk, job.attempt, 30.0, max_snoozes=5) is Outcome.STALE
        assert whole_row(job.pk) == before

    def test_snooze_at_a_moment(self) -> None:
        jobs.noop.enqueue()
        job = claim_one()
        moment = (db_now() + dt.timedelta(days=1)).replace(microsecond=0)
        assert protocol.snooze(job.pk, job.attempt, moment, max_snoozes=5) is Outcome.SNOOZED
        assert fields(job.pk, "run_at")["run_at"] == moment

    def test_past_the_cap_the_job_is_dead_snoozed_too_often(self, make_due) -> None:
        jobs.noop.enqueue(max_attempts=1)
        for expected in range(1, 3):
            job = claim_one()
            assert protocol.snooze(job.pk, job.attempt, 0.0, max_snoozes=2) is Outcome.SNOOZED
            assert fields(job.pk, "snoozes")["snoozes"] == expected
            make_due(job)
        job = claim_one()
        outcome = protocol.snooze(job.pk, job.attempt, 0.0, max_snoozes=2, traceback="tb")
        assert outcome is Outcome.DEAD
        row = fields(job.pk, "status", "snoozes", "attempt", "released")
        assert row == {"status": Status.DEAD, "snoozes": 2, "attempt": 3, "released": 2}
        letter = DeadLetter.objects.get(job_id=job.pk)
        assert letter.reason == "snoozed too often"
        assert [(e["attempt"], e["kind"], e["traceback"]) for e in letter.errors] == [
            (3, "snoozed too often", "tb")
        ]
        assert "LEASEJOBS_MAX_SNOOZES" in letter.errors[0]["error"]
        check_invariants([job.pk])

    def test_a_cap_of_zero_dead_letters_the_first_snooze(self) -> None:
        jobs.noop.enqueue()
        job = claim_one()
        assert protocol.snooze(job.pk, job.attempt, 0.0, max_snoozes=0) is Outcome.DEAD

    def test_a_job_asked_to_cancel_ends_cancelled_instead(self) -> None:
        jobs.noop.enqueue()
        job = claim_one()
        protocol.request_cancel(job.pk)
        assert protocol.snooze(job.pk, job.attempt, 30.0, max_snoozes=5) is Outcome.CANCELLED
        row = fields(job.pk, "status", "snoozes", "released")
        assert row == {"status": Status.CANCELLED, "snoozes": 0, "released": 0}

    def test_snoozes_and_failures_share_one_budget_of_charged_attempts(self, make_due) -> None:
        """Two snoozes, then two failures: with max_attempts=2 the second failure is the last."""
        jobs.noop.enqueue(max_attempts=2)
        outcomes = []
        for step in ("snooze", "snooze", "fail", "fail"):
            job = claim_one()
            if step == "snooze":
                outcomes.append(protocol.snooze(job.pk, job.attempt, 0.0, max_snoozes=5))
            else:
                outcomes.append(protocol.fail(job.pk, job.attempt, ASKED, when=0.0))
            make_due(job)
        assert outcomes == [Outcome.SNOOZED, Outcome.SNOOZED, Outcome.RETRIED, Outcome.DEAD]
        row = fields(job.pk, "attempt", "released", "snoozes", "status")
        assert row == {"attempt": 4, "released": 2, "snoozes": 2, "status": Status.DEAD}
        check_invariants([job.pk])
