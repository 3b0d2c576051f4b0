"""Deferral: a claim whose name the worker cannot run hands the attempt back, uncharged, to wait
for a worker that can; dead-lettered only after ``LEASEJOBS_UNKNOWN_JOB_GRACE``."""

from __future__ import annotations

import datetime as dt
import logging

import pytest
from django.core.checks import run_checks
from django.db.models import F
from django.db.models.functions import Now

from django_leasejobs import protocol
from django_leasejobs.core.conf import settings as conf
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Failure, Outcome

from ..conftest import fields, shifted

pytestmark = pytest.mark.django_db

HOUR = dt.timedelta(hours=1)
FAILURE = Failure(
    "No job is registered as 'shop.new_job'; it was not run. Deploy it.",
    kind="unregistered job",
    advice="Deploy it.",
)


def claimed(name: str = "shop.new_job") -> Job:
    Job.objects.create(name=name)
    (job,) = protocol.claim("w1", batch=1)
    return job


def defer(job: Job, attempt: int | None = None, grace: dt.timedelta = HOUR) -> Outcome:
    return protocol.defer(
        job.pk,
        job.attempt if attempt is None else attempt,
        FAILURE,
        deferrals=job.deferrals,
        grace=grace,
        worker_id="w1",
        reason="'shop.new_job' is not registered here",
    )


def seconds_ahead(job_id: int) -> float:
    row = Job.objects.filter(pk=job_id).annotate(now=Now()).values("run_at", "now").get()
    return (row["run_at"] - row["now"]).total_seconds()


class TestDefer:
    def test_the_job_waits_again_uncharged_with_a_growing_delay(self, caplog) -> None:
        job = claimed()
        with caplog.at_level(logging.WARNING, logger="django_leasejobs"):
            assert defer(job) is Outcome.RELEASED
        row = fields(job.pk, "status", "attempt", "released", "deferrals", "lease_owner")
        assert row == {
            "status": Status.PENDING,
            "attempt": 1,
            "released": 1,
            "deferrals": 1,
            "lease_owner": "",
        }
        assert 3 <= seconds_ahead(job.pk) <= 6
        assert Job.objects.get(pk=job.pk).attempts_charged == 0
        (line,) = [r.getMessage() for r in caplog.records if "job.deferred" in r.getMessage()]
        assert "worker=w1" in line
        assert "not registered here" in line
        first = fields(job.pk, "first_deferred_at")["first_deferred_at"]
        assert first is not None
        Job.objects.filter(pk=job.pk).update(run_at=shifted(-1))
        (job,) = protocol.claim("w2", batch=1)
        assert defer(job) is Outcome.RELEASED
        assert 8 <= seconds_ahead(job.pk) <= 11
        row = fields(job.pk, "deferrals", "first_deferred_at", "attempt", "released")
        assert row == {"deferrals": 2, "first_deferred_at": first, "attempt": 2, "released": 2}
        assert not DeadLetter.objects.exists()

    def test_the_delay_doubles_up_to_five_minutes(self) -> None:
        delays = [protocol.deferral_delay(n) for n in (0, 1, 2, 6, 7, 10_000)]
        assert delays == [5, 10, 20, 300, 300, 300]

    def test_a_stale_token_changes_nothing(self) -> None:
        job = claimed()
        before = fields(job.pk, "status", "attempt", "released", "deferrals", "run_at")
        assert defer(job, attempt=job.attempt + 1) is Outcome.STALE
        assert fields(job.pk, *before) == before
        assert protocol.fail(job.pk, job.attempt, Failure("boom")) is Outcome.RETRIED
        assert defer(job) is Outcome.STALE  # no longer running
        assert fields(job.pk, "deferrals")["deferrals"] == 0

    def test_a_cancel_request_ends_the_attempt_cancelled(self) -> None:
        job = claimed()
        Job.objects.filter(pk=job.pk).update(cancel_requested_at=Now())
        assert defer(job) is Outcome.CANCELLED
        assert fields(job.pk, "status")["status"] == Status.CANCELLED

    def test_dead_lettered_once_the_grace_has_passed_since_the_first_deferral(self) -> None:
        job = claimed()
        assert defer(job) is Outcome.RELEASED
        Job.objects.filter(pk=job.pk).update(run_at=shifted(-1), first_deferred_at=shifted(-3599))
        (job,) = protocol.claim("w1", batch=1)
        assert defer(job) is Outcome.RELEASED  # a second short of the hour
        Job.objects.filter(pk=job.pk).update(run_at=shifted(-1), first_deferred_at=shifted(-3601))
        (job,) = protocol.claim("w1", batch=1)
        assert defer(job) is Outcome.DEAD
        letter = DeadLetter.objects.get(job_id=job.pk)
        assert letter.reason == "unregistered job"
        error = letter.errors[-1]["error"]
        assert error.startswith("No job is registered as 'shop.new_job'; it was not run.")
        assert "LEASEJOBS_UNKNOWN_JOB_GRACE (1:00:00)" in error
        assert error.endswith("then replay it. Deploy it.")

    def test_a_zero_grace_dead_letters_at_the_first_claim(self) -> None:
        job = claimed()
        assert defer(job, grace=dt.timedelta(0)) is Outcome.DEAD
        assert DeadLetter.objects.get(job_id=job.pk).reason == "unregistered job"


class TestWake:
    def deferred(self, name: str) -> Job:
        job = claimed(name)
        assert defer(job) is Outcome.RELEASED
        return job

    def test_a_worker_that_knows_the_name_makes_its_deferred_jobs_due(self) -> None:
        known, other = self.deferred("shop.new_job"), self.deferred("shop.other")
        assert protocol.wake_deferred(["shop.new_job", "shop.absent"]) == 1
        assert seconds_ahead(known.pk) <= 0 < seconds_ahead(other.pk)
        assert [j.pk for j in protocol.claim("w2", batch=5)] == [known.pk]
        assert protocol.wake_deferred([]) == 0

    def test_only_a_delay_the_deferral_set_is_cut_short(self) -> None:
        job = self.deferred("shop.new_job")
        Job.objects.filter(pk=job.pk).update(run_at=shifted(3600))  # an operator moved it
        assert protocol.wake_deferred(["shop.new_job"]) == 0
        assert seconds_ahead(job.pk) > 3500
        # A job enqueued for later that was never deferred is never made due.
        later = Job.objects.create(name="shop.new_job", run_at=shifted(3600))
        assert protocol.wake_deferred(["shop.new_job"]) == 0
        assert seconds_ahead(later.pk) > 3500

    def test_a_snooze_after_a_deferral_is_not_cut_short(self) -> None:
        job = self.deferred("shop.new_job")
        assert protocol.wake_deferred(["shop.new_job"]) == 1
        (job,) = protocol.claim("w2", batch=1)
        assert protocol.snooze(job.pk, job.attempt, 600, max_snoozes=5) is Outcome.SNOOZED
        assert protocol.wake_deferred(["shop.new_job"]) == 0
        assert seconds_ahead(job.pk) > 500
        assert protocol.waiting_unknown() == {}  # a worker knew it: it waits for its snooze

    def test_waiting_unknown_counts_by_name(self) -> None:
        self.deferred("b.job")
        self.deferred("a.job")
        self.deferred("a.job")
        assert protocol.waiting_unknown() == {"a.job": 2, "b.job": 1}
        Job.objects.filter(name="b.job").update(deferred_until=F("run_at"))
        assert protocol.wake_deferred(["b.job"]) == 1
        protocol.claim("w1", batch=5)
        assert protocol.waiting_unknown() == {"a.job": 2}


class TestSetting:
    def test_the_default_is_a_day(self) -> None:
        assert dt.timedelta(hours=24) == conf.UNKNOWN_JOB_GRACE

    @pytest.mark.parametrize("value", ["soon", -5, 3600, "1h-"])
    def test_a_bad_grace_is_a_system_check_error(self, settings, value) -> None:
        settings.LEASEJOBS_UNKNOWN_JOB_GRACE = value
        messages = [m for m in run_checks() if m.id == "leasejobs.E001"]
        assert any("LEASEJOBS_UNKNOWN_JOB_GRACE" in m.msg for m in messages), messages
