"""Handlers that choose their retries, run as a worker runs them: ``Retry``, ``Snooze`` and
``retry_on``, sync and async, through ``drain``/``run_job``, eager mode and a burst worker.

Time moves by moving ``run_at`` in the database (``travel``), never by sleeping.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from testapp import retry_jobs
from testapp.models import Hit

from django_leasejobs import Retry, Snooze
from django_leasejobs.db.dbtime import db_now
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.runtime.worker import Worker
from django_leasejobs.testing import drain, run_job, travel

from ..conftest import fields
from ..invariants import check_invariants

WORKER = {"lease": 5.0, "heartbeat": 0.1, "poll": 0.05, "scheduler": False}


def row(job: Job) -> dict[str, Any]:
    return fields(job.pk, "status", "attempt", "released", "snoozes", "run_at", "errors", "result")


def waits_about(job: Job, seconds: float) -> bool:
    return abs((row(job)["run_at"] - db_now()).total_seconds() - seconds) < 5


def kinds(job: Job) -> list[str]:
    return [entry["kind"] for entry in row(job)["errors"]]


@pytest.mark.django_db
class TestDrain:
    @pytest.mark.parametrize("handler", [retry_jobs.retry_once, retry_jobs.async_retry_once])
    def test_retry_waits_its_time_and_is_charged(self, handler: Any) -> None:
        job = handler.enqueue(3600)
        assert drain().retried == 1
        assert row(job)["status"] == Status.FAILED
        assert waits_about(job, 3600)
        assert kinds(job) == ["retry requested"]
        assert "the handler asked to retry in 3600 s" in row(job)["errors"][0]["error"]
        assert drain().total == 0  # not before its time
        travel(3600)
        assert drain().succeeded == 1
        after = row(job)
        assert (after["status"], after["attempt"], after["released"]) == (Status.SUCCEEDED, 2, 0)
        assert after["result"] == "done on attempt 2"
        check_invariants([job.pk])

    def test_retry_on_the_last_attempt_dead_letters_with_its_history(self) -> None:
        job = retry_jobs.retry_always.enqueue()
        assert drain().retried == 1
        travel(300)
        assert drain().dead == 1
        letter = DeadLetter.objects.get(job_id=job.pk)
        assert letter.reason == "attempts exhausted"
        assert [e["kind"] for e in letter.errors] == ["retry requested"] * 2
        check_invariants([job.pk])

    def test_retry_at_a_moment(self) -> None:
        moment = db_now().replace(microsecond=0).isoformat()
        job = retry_jobs.retry_at.enqueue(moment.replace(db_now().strftime("%Y"), "2999"))
        assert drain().retried == 1
        assert row(job)["run_at"].year == 2999

    @pytest.mark.parametrize("handler", [retry_jobs.snooze_once, retry_jobs.async_snooze_once])
    def test_snooze_waits_its_time_without_spending_an_attempt(self, handler: Any) -> None:
        job = handler.enqueue(600)  # max_attempts=1: only an uncharged snooze lets it run again
        assert drain().snoozed == 1
        snoozed = row(job)
        assert (snoozed["status"], snoozed["attempt"], snoozed["snoozes"]) == (Status.PENDING, 1, 1)
        assert snoozed["errors"] == []
        assert waits_about(job, 600)
        travel(600)
        assert drain().succeeded == 1
        done = row(job)
        assert (done["status"], done["attempt"], done["released"]) == (Status.SUCCEEDED, 2, 1)
        check_invariants([job.pk])

    def test_snoozing_past_the_cap_dead_letters_the_job(self, settings: Any) -> None:
        settings.LEASEJOBS_MAX_SNOOZES = 3
        job = retry_jobs.snooze_always.enqueue()
        summary = drain()  # after=0: due again at once, each time
        assert (summary.snoozed, summary.dead) == (3, 1)
        assert Hit.objects.filter(job_id=job.pk).count() == 4
        assert DeadLetter.objects.get(job_id=job.pk).reason == "snoozed too often"
        assert (row(job)["attempt"], row(job)["snoozes"]) == (4, 3)
        check_invariants([job.pk])

    def test_retry_on_retries_only_the_listed_exceptions(self) -> None:
        timeout = retry_jobs.only_network.enqueue("timeout")
        reset = retry_jobs.only_network.enqueue("reset")  # a subclass of ConnectionError
        value = retry_jobs.only_network.enqueue("value")
        summary = drain()
        assert (summary.retried, summary.dead) == (4, 3)
        for retried in (timeout, reset):
            assert (row(retried)["attempt"], retried.max_attempts) == (3, 3)
            assert DeadLetter.objects.get(job_id=retried.pk).reason == "attempts exhausted"
        assert row(value)["attempt"] == 1
        letter = DeadLetter.objects.get(job_id=value.pk)
        assert letter.reason == "not in retry_on"
        assert letter.errors[0]["error"] == "ValueError: bad input: retrying cannot help"
        check_invariants([timeout.pk, reset.pk, value.pk])

    def test_retry_on_gives_each_exception_its_backoff(self) -> None:
        refused = retry_jobs.own_backoffs.enqueue("refused")
        timeout = retry_jobs.own_backoffs.enqueue("timeout")
        assert drain().retried == 2
        assert waits_about(refused, 500)  # ConnectionError's own Backoff
        assert waits_about(timeout, 7)  # None: the job's backoff

    def test_async_retry_on(self) -> None:
        timeout = retry_jobs.async_only_timeouts.enqueue("timeout")
        other = retry_jobs.async_only_timeouts.enqueue("other")
        assert (drain().retried, row(timeout)["attempt"]) == (2, 3)
        assert DeadLetter.objects.get(job_id=other.pk).reason == "not in retry_on"


@pytest.mark.django_db
class TestRunJobAndEager:
    def test_run_job_raises_what_the_handler_raised_after_recording_it(self) -> None:
        with pytest.raises(Retry, match="the partner API said later"):
            run_job(retry_jobs.retry_once, 60)
        with pytest.raises(Snooze) as info:
            run_job(retry_jobs.async_snooze_once, 60)
        assert info.value.after == 60
        rows = dict(Job.objects.values_list("name", "status"))
        assert rows == {
            retry_jobs.retry_once.name: Status.FAILED,
            retry_jobs.async_snooze_once.name: Status.PENDING,
        }

    def test_eager_mode_leaves_the_job_waiting_and_raises_nothing(
        self, settings: Any, django_capture_on_commit_callbacks: Any
    ) -> None:
        settings.LEASEJOBS_EAGER = True
        with django_capture_on_commit_callbacks(execute=True) as ran, transaction.atomic():
            retried = retry_jobs.retry_once.enqueue(60)
            snoozed = retry_jobs.snooze_once.enqueue(60)
        assert len(ran) == 2
        assert (row(retried)["status"], row(snoozed)["status"]) == (Status.FAILED, Status.PENDING)
        travel(60)
        assert drain().succeeded == 2


@pytest.mark.django_db(transaction=True)
class TestWorker:
    def test_a_burst_worker_runs_sync_and_async_handlers_alike(self) -> None:
        enqueued = [
            retry_jobs.retry_once.enqueue(3600),
            retry_jobs.async_retry_once.enqueue(3600),
            retry_jobs.snooze_once.enqueue(3600),
            retry_jobs.async_snooze_once.enqueue(3600),
            retry_jobs.async_only_timeouts.enqueue("other"),
        ]
        summary = Worker(concurrency=2, **WORKER).run(burst=True)
        assert (summary.retried, summary.snoozed, summary.dead) == (2, 2, 1)
        travel(3600)
        summary = Worker(concurrency=2, **WORKER).run(burst=True)
        assert summary.succeeded == 4
        ids = [job.pk for job in enqueued]
        assert set(Job.objects.filter(pk__in=ids).values_list("status", "attempt")) == {
            (Status.SUCCEEDED, 2),
            (Status.DEAD, 1),
        }
        check_invariants(ids)
