"""Timeouts and cancelling a running job, in-process: the watchdog, ``ctx.cancelled``, stuck
handlers and ``max_stuck``, against the real database.

A handler that ignores the flag keeps its thread; the tests wait for it to return (it records
a ``Hit``) so no thread outlives its test.
"""

from __future__ import annotations

import logging
import math
import time

import pytest
from django.db import connection
from testapp import jobs
from testapp.models import Hit

from django_leasejobs import job, protocol
from django_leasejobs.errors import JobValidationError
from django_leasejobs.models import FINAL, DeadLetter, Job, Status
from django_leasejobs.runtime.listener import Listener
from django_leasejobs.runtime.slots import Slot
from django_leasejobs.runtime.worker import Worker

from ..conftest import fields
from ..invariants import check_invariants, wait_for
from .test_worker import FAST, Background

pytestmark = pytest.mark.django_db(transaction=True)


def hits(job: Job) -> list[tuple[int, str]]:
    return list(
        Hit.objects.filter(job_id=job.pk).order_by("attempt").values_list("attempt", "label")
    )


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records]


class TestTimeout:
    def test_a_handler_that_watches_the_flag_stops_and_the_attempt_fails_as_timeout(
        self,
    ) -> None:
        job = jobs.stops_at_timeout.enqueue()
        summary = Worker(concurrency=1, **FAST).run(burst=True)
        assert (summary.dead, summary.timed_out, summary.stuck, summary.stale) == (1, 1, 0, 0)
        row = fields(job.pk, "status", "errors", "last_error")
        assert row["status"] == Status.DEAD  # max_attempts=1
        assert [e["kind"] for e in row["errors"]] == ["timeout"]
        assert "longer than its timeout of 0.3 s" in row["last_error"]
        assert DeadLetter.objects.get(job_id=job.pk).reason == "attempts exhausted"
        assert hits(job) == [(1, "timeout")]  # ctx.cancel_reason, seen by the handler

    def test_a_handler_that_ignores_it_is_stuck_its_result_refused_and_the_retry_runs(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        job = jobs.times_out.enqueue(seconds=1.5)
        with (
            caplog.at_level(logging.INFO, logger="django_leasejobs"),
            Background(Worker(concurrency=2, **FAST)) as background,
        ):
            wait_for(lambda: len(hits(job)) == 2, what="the stuck handler to return")
            wait_for(lambda: any(m.startswith("worker.unstuck ") for m in messages(caplog)))
        summary = background.summary
        assert summary is not None
        assert (summary.retried, summary.succeeded, summary.timed_out, summary.stuck) == (
            1,
            1,
            1,
            1,
        )
        row = fields(job.pk, "status", "attempt", "result", "errors")
        assert (row["status"], row["attempt"], row["result"]) == (
            Status.SUCCEEDED,
            2,
            "attempt 2",  # the first attempt's later "attempt 1" never overwrote it
        )
        assert [e["kind"] for e in row["errors"]] == ["timeout"]
        assert sorted(hits(job)) == [(1, "ran"), (2, "ran")]
        log = messages(caplog)
        assert any(m.startswith("worker.stuck ") and f"job={job.pk}" in m for m in log)
        assert any(m.startswith("worker.unstuck ") and f"job={job.pk}" in m for m in log)
        # A timeout is not a stale write: one line for the attempt the worker ended.
        assert [m.split()[0] for m in log if f" id={job.pk} " in f"{m} "] == [
            "job.running",
            "job.timeout",
            "job.running",
            "job.succeeded",
        ]

    def test_a_stuck_thread_holds_its_slot_until_its_handler_returns(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        job = jobs.times_out.enqueue(seconds=1.0)
        with caplog.at_level(logging.INFO, logger="django_leasejobs"):
            with Background(Worker(concurrency=1, **FAST)):
                wait_for(lambda: fields(job.pk, "status")["status"] == Status.SUCCEEDED)
            wait_for(lambda: len(hits(job)) == 2)
        log = messages(caplog)
        unstuck = next(i for i, m in enumerate(log) if m.startswith("worker.unstuck "))
        second_run = next(
            i
            for i, m in enumerate(log)
            if m.startswith(f"job.succeeded id={job.pk} ") and "attempt=2" in m
        )
        # The retry may be claimed (prefetched) meanwhile, but the only thread was stuck.
        assert unstuck < second_run, "the retry ran while the only thread was stuck"

    def test_max_stuck_stops_the_worker_by_itself(self, caplog: pytest.LogCaptureFixture) -> None:
        job = jobs.times_out.enqueue(seconds=1.0)
        worker = Worker(concurrency=2, max_stuck=1, **FAST)
        with caplog.at_level(logging.INFO, logger="django_leasejobs"):
            summary = worker.run()  # not burst: only max_stuck ends it
        wait_for(lambda: len(hits(job)) >= 1, what="the stuck handler to return")
        assert worker.stuck_limit_reached
        assert summary.stuck == 1
        assert any("reason=max_stuck=1 reached" in m for m in messages(caplog))
        assert fields(job.pk, "status")["status"] in (Status.FAILED, Status.SUCCEEDED)

    def test_the_setting_gives_jobs_without_their_own_timeout_one(self, settings) -> None:
        settings.LEASEJOBS_TIMEOUT_SECONDS = 0.2
        job = jobs.until_cancelled.enqueue(seconds=30, max_attempts=1)
        summary = Worker(concurrency=1, **FAST).run(burst=True)
        assert (summary.dead, summary.timed_out) == (1, 1)
        assert hits(job) == [(1, "timeout")]

    def test_no_timeout_by_default(self) -> None:
        job = jobs.until_cancelled.enqueue(seconds=0.4)
        summary = Worker(concurrency=1, **FAST).run(burst=True)
        assert (summary.succeeded, summary.timed_out) == (1, 0)
        assert hits(job) == [(1, "None")]


class TestCancelRunning:
    def test_a_cooperative_handler_is_cancelled_while_it_runs(self) -> None:
        job = jobs.until_cancelled.enqueue(seconds=30)
        with Background(Worker(concurrency=1, **FAST)) as background:
            wait_for(lambda: fields(job.pk, "status")["status"] == Status.RUNNING)
            assert protocol.request_cancel(job.pk) is protocol.Cancel.REQUESTED
            wait_for(lambda: hits(job) == [(1, "cancelled")], what="the handler to see it")
        assert background.summary is not None
        assert (background.summary.cancelled, background.summary.stale) == (1, 0)
        row = fields(job.pk, "status", "result", "lease_owner", "finished_at")
        assert (row["status"], row["result"], row["lease_owner"]) == (Status.CANCELLED, None, "")
        assert row["finished_at"] is not None

    def test_a_handler_that_ignores_it_is_cancelled_under_it_and_its_result_refused(
        self,
    ) -> None:
        job = jobs.ignores_cancel.enqueue(seconds=1.5)
        with Background(Worker(concurrency=1, **FAST)):
            wait_for(lambda: fields(job.pk, "status")["status"] == Status.RUNNING)
            protocol.cancel(job.pk)
            wait_for(lambda: fields(job.pk, "status")["status"] == Status.CANCELLED)
            assert hits(job) == []  # ended while the handler still slept
            wait_for(lambda: hits(job) == [(1, "cancelled")], what="the handler to return")
        assert fields(job.pk, "status", "result") == {"status": Status.CANCELLED, "result": None}

    def test_a_job_cancelled_before_its_thread_took_it_never_runs(self) -> None:
        """A claimed job waiting for a pool thread (a prefetch) is ended without running."""
        job = jobs.until_cancelled.enqueue(seconds=30)
        worker = Worker(concurrency=1, **FAST)
        (claimed,) = protocol.claim(worker.options.worker_id, batch=1)
        slot = Slot(claimed)
        worker.slots.add(slot)
        protocol.request_cancel(job.pk)
        worker.watchdog.request_cancel(
            protocol.renew(worker.options.worker_id, [slot.token]).cancel_requested
        )
        worker.watchdog.watch_once()
        assert fields(job.pk, "status")["status"] == Status.CANCELLED
        assert slot.cancellation.reason == "cancelled"
        assert worker.pool._work(slot) is False
        assert hits(job) == []
        assert (worker.summary.cancelled, worker.slots.total) == (1, 1)
        worker.pool._returned(slot)
        assert worker.slots.total == 0


class TestCancelRacingCompletion:
    ROUNDS = 30

    def test_every_job_ends_once_succeeded_or_cancelled(self) -> None:
        """Cancels land as handlers return: the pool's completion and the watchdog's cancel
        race on one guard, round after round; each job has exactly one final state."""
        created = [jobs.ignores_cancel.enqueue(seconds=0.02 * (i % 5)) for i in range(self.ROUNDS)]
        ids = [job.pk for job in created]
        asked = set()
        worker = Worker(concurrency=4, **FAST)
        with Background(worker):
            while len(asked) < len(ids):
                running = Job.objects.filter(pk__in=ids, status=Status.RUNNING)
                for pk in running.exclude(pk__in=asked).values_list("pk", flat=True):
                    protocol.request_cancel(pk)
                    asked.add(pk)
                if Job.objects.filter(pk__in=ids, status__in=FINAL).count() == len(ids):
                    break
                time.sleep(0.005)
            wait_for(lambda: Job.objects.filter(pk__in=ids, status__in=FINAL).count() == len(ids))
        # A job cancelled while it waited for a thread (a prefetch) never ran; the others'
        # handlers have all returned once nothing holds a thread.
        wait_for(lambda: worker.slots.total == 0, what="every handler to return")
        rows = check_invariants(ids)
        ran = set(Hit.objects.filter(job_id__in=ids).values_list("job_id", flat=True))
        for row in rows:
            assert row.status in (Status.SUCCEEDED, Status.CANCELLED), row
            assert row.status == Status.CANCELLED or row.pk in ran, row
            assert (row.result == "finished") == (row.status == Status.SUCCEEDED), row
        assert {row.status for row in rows if row.pk not in asked} <= {Status.SUCCEEDED}


class TestTimeoutOption:
    @pytest.mark.parametrize("value", [0, -1, math.inf, math.nan, "5", True])
    def test_bad_timeouts_are_refused_at_decoration(self, value: object) -> None:
        with pytest.raises(JobValidationError, match="timeout must be None or a positive number"):

            @job(name="tests.bad_timeout", timeout=value)  # type: ignore[call-overload]
            def bad() -> None:
                pass

    def test_a_good_timeout_is_kept_in_seconds(self) -> None:
        @job(name="tests.good_timeout", timeout=2)
        def good() -> None:
            pass

        assert good.timeout == 2.0
        assert good.get_timeout() == 2.0
        assert jobs.noop.get_timeout() is None


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="LISTEN/NOTIFY is PostgreSQL's",
)
class TestCancelNotify:
    """With a 30 s heartbeat only the notification can bring the request within the bound."""

    def test_the_listener_hears_a_cancel_request_apart_from_queues(self) -> None:
        job = jobs.noop.enqueue(delay=3600)
        Job.objects.filter(pk=job.pk).update(status=Status.RUNNING, attempt=1, lease_owner="w")
        listener = Listener()
        try:
            listener.start()
            protocol.request_cancel(job.pk)
            assert listener.wait(5) == set()  # not a queue name
            assert listener.take_cancels() == {job.pk}
            assert listener.take_cancels() == set()
        finally:
            listener.close()

    def test_a_running_job_is_cancelled_at_once_through_notify(self) -> None:
        worker = Worker(concurrency=1, lease=120.0, heartbeat=30.0, poll=0.05)
        job = jobs.until_cancelled.enqueue(seconds=60)
        with Background(worker):
            wait_for(
                lambda: worker.wakeup.listener is not None and worker.wakeup.listener.connected()
            )
            wait_for(lambda: fields(job.pk, "status")["status"] == Status.RUNNING)
            protocol.request_cancel(job.pk)
            wait_for(lambda: hits(job) == [(1, "cancelled")], timeout=20, what="NOTIFY")
        assert fields(job.pk, "status")["status"] == Status.CANCELLED


class TestAsyncHandlers:
    """An ``async def`` handler is stopped, not only told: its task is cancelled."""

    def test_a_timed_out_async_handler_is_cancelled_and_not_stuck(self) -> None:
        job = jobs.async_times_out.enqueue(seconds=30)
        worker = Worker(concurrency=1, scheduler=False, **FAST)
        summary = worker.run(burst=True)
        assert (summary.dead, summary.timed_out, summary.stuck) == (1, 1, 0)
        row = fields(job.pk, "status", "errors")
        # Only the timeout is recorded: the task's own "cancelled" failure was refused.
        assert (row["status"], [e["kind"] for e in row["errors"]]) == (Status.DEAD, ["timeout"])
        wait_for(lambda: worker.slots.total == 0, what="the task to end")

    def test_a_running_async_handler_is_cancelled_by_request(self) -> None:
        job = jobs.async_until_cancelled.enqueue(seconds=30)
        worker = Worker(concurrency=1, scheduler=False, **FAST)
        with Background(worker) as background:
            wait_for(lambda: fields(job.pk, "status")["status"] == Status.RUNNING)
            assert protocol.request_cancel(job.pk) is protocol.Cancel.REQUESTED
            wait_for(lambda: fields(job.pk, "status")["status"] == Status.CANCELLED)
            wait_for(lambda: worker.slots.total == 0, what="the task to end")
        assert background.summary is not None
        assert (background.summary.cancelled, background.summary.stuck) == (1, 0)
        assert fields(job.pk, "result", "errors") == {"result": None, "errors": []}
