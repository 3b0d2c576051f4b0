"""``async def`` handlers on the in-process worker: its event loop beside the pool threads.

Async jobs share the claim, the heartbeat and the fenced reports with sync ones; these tests run
the real loop against the real database and move time in the database, never by sleeping long.
"""

from __future__ import annotations

import re

import pytest
from django.db import transaction
from testapp import jobs
from testapp.models import Hit

from django_leasejobs import protocol
from django_leasejobs.models import Job, Status
from django_leasejobs.protocol import Outcome
from django_leasejobs.runtime import async_execution
from django_leasejobs.runtime.worker import Worker

from ..conftest import fields, shifted, take_over
from ..invariants import check_invariants, wait_for
from .test_worker import FAST, Background, status

pytestmark = pytest.mark.django_db(transaction=True)


def last_error_kind(job: Job) -> str:
    return fields(job.pk, "errors")["errors"][-1]["kind"]


def slot_of(worker: Worker, job: Job):
    return wait_for(lambda: worker.slots.get(job.pk), what=f"job {job.pk} in flight")


class TestRun:
    def test_results_are_reported_and_plain_successes_completed_together(self) -> None:
        summed = jobs.async_add.enqueue(2, 3)
        naps = jobs.nap.enqueue_many([((0,), {})] * 20)
        recorded = jobs.async_record.enqueue("orm")
        where = jobs.async_thread_name.enqueue()
        worker = Worker(concurrency=1, **FAST, scheduler=False)
        summary = worker.run(burst=True)
        assert (summary.succeeded, summary.retried, summary.stale) == (23, 0, 0)
        assert fields(summed.pk, "status", "result") == {"status": Status.SUCCEEDED, "result": 5}
        # Run natively on the worker's loop thread, not through async_to_sync on a pool thread.
        assert fields(where.pk, "result")["result"] == "leasejobs-async"
        hit = Hit.objects.get(job_id=recorded.pk)
        assert (hit.attempt, hit.label) == (1, "orm")
        finished_by = set(Job.objects.values_list("finished_by", flat=True))
        assert finished_by == {worker.options.worker_id}
        check_invariants([summed.pk, recorded.pk, where.pk, *(j.pk for j in naps)])

    def test_failures_are_retried_then_succeed(self) -> None:
        flaky = jobs.async_flaky.enqueue(succeed_on=3)
        jobs.wait_until_final.enqueue([flaky.pk], priority=-1)  # keeps the burst running
        summary = Worker(concurrency=2, **FAST, scheduler=False).run(burst=True)
        row = fields(flaky.pk, "status", "attempt", "result", "errors")
        assert (row["status"], row["attempt"]) == (Status.SUCCEEDED, 3)
        assert row["result"] == "async ok on attempt 3"
        assert [e["error"] for e in row["errors"]] == [
            "RuntimeError: async failure on attempt 1",
            "RuntimeError: async failure on attempt 2",
        ]
        assert (summary.succeeded, summary.retried) == (2, 2)
        check_invariants([flaky.pk])

    def test_async_jobs_run_while_every_pool_thread_is_busy(self) -> None:
        blocker = jobs.sleep.enqueue(60, label="sync")  # cooperative: stops when released
        quick = jobs.async_record.enqueue_many([((f"a{i}",), {}) for i in range(5)])
        worker = Worker(concurrency=1, grace=0, **FAST, scheduler=False)
        with Background(worker):
            wait_for(lambda: status(blocker) == Status.RUNNING, what="sync job running")
            wait_for(
                lambda: (
                    Job.objects.filter(
                        pk__in=[j.pk for j in quick], status=Status.SUCCEEDED
                    ).count()
                    == 5
                ),
                what="async jobs done beside the busy thread",
            )
            assert status(blocker) == Status.RUNNING
        assert fields(blocker.pk, "status", "released") == {"status": Status.PENDING, "released": 1}
        check_invariants([j.pk for j in quick])

    @pytest.mark.parametrize("kind", ["keyboard", "exit", "value"])
    def test_anything_a_handler_raises_fails_its_attempt_and_the_loop_goes_on(self, kind) -> None:
        bad = jobs.async_raises.enqueue(kind)
        jobs.wait_until_final.enqueue([bad.pk], priority=-1)
        after = jobs.async_add.enqueue(1, 1, priority=-2)
        worker = Worker(concurrency=2, **FAST, scheduler=False)
        summary = worker.run(burst=True)
        row = fields(bad.pk, "status", "attempt", "last_error")
        assert (row["status"], row["attempt"]) == (Status.DEAD, 3)
        expected = {"keyboard": "KeyboardInterrupt", "exit": "SystemExit", "value": "ValueError"}
        assert row["last_error"].startswith(expected[kind])
        assert fields(after.pk, "status", "result") == {"status": Status.SUCCEEDED, "result": 2}
        assert (summary.dead, summary.retried) == (1, 2)
        assert worker.async_pool.thread is not None
        assert not worker.async_pool.thread.is_alive()  # stopped by the shutdown, not by the error

    def test_async_django_tasks_run_on_the_loop(self) -> None:
        from testapp import tasks

        added = tasks.async_add.enqueue(2, 5)
        where = tasks.async_thread_name.enqueue()
        summary = Worker(concurrency=1, **FAST, scheduler=False).run(burst=True)
        assert summary.succeeded == 2
        added.refresh()
        where.refresh()
        assert (added.return_value, where.return_value) == (7, "leasejobs-async")

    def test_an_async_job_of_a_module_not_imported_yet_runs_on_the_loop(
        self, settings, late_jobs: str
    ) -> None:
        """Its module, allowed by the setting, is imported when the worker meets the row, in
        time to tell that the handler is async."""
        settings.LEASEJOBS_TASK_MODULES = [late_jobs]
        job = Job.objects.create(name=f"{late_jobs}.late_async")
        summary = Worker(concurrency=1, **FAST, scheduler=False).run(burst=True)
        assert summary.succeeded == 1
        assert fields(job.pk, "result")["result"] == "leasejobs-async"


class TestLease:
    def test_the_heartbeat_renews_a_long_async_job(self) -> None:
        job = jobs.async_sleep.enqueue(60, label="long")
        worker = Worker(concurrency=1, lease=30, heartbeat=0.1, poll=0.05, grace=0)
        with Background(worker):
            wait_for(lambda: status(job) == Status.RUNNING, what="claimed")
            # As if the lease were about to run out: only a renewal moves it back out.
            Job.objects.filter(pk=job.pk).update(lease_expires_at=shifted(1))
            soon = Job.objects.filter(pk=job.pk, lease_expires_at__gt=shifted(20))
            wait_for(soon.exists, what="lease renewed by the heartbeat")
            assert fields(job.pk, "status", "attempt") == {"status": Status.RUNNING, "attempt": 1}

    def test_a_lost_lease_sets_lease_lost_and_the_result_is_never_written(self) -> None:
        job = jobs.async_sleep.enqueue(60, label="first")
        worker = Worker(concurrency=1, **FAST)
        with Background(worker) as running:
            wait_for(lambda: status(job) == Status.RUNNING, what="job claimed")
            second = take_over(job.pk)  # another worker takes it over, between two heartbeats
            # The handler sees ctx.lease_lost, stops early and records its run.
            wait_for(lambda: Hit.objects.filter(job_id=job.pk, attempt=1).exists(), what="stop")
            wait_for(lambda: running.worker.slots.total == 0, what="slot freed")
            assert protocol.complete(second.pk, second.attempt, "second") is Outcome.SUCCEEDED
        assert running.summary is not None
        assert (running.summary.stale, running.summary.succeeded) == (1, 0)
        row = fields(job.pk, "status", "attempt", "result")
        assert row == {"status": Status.SUCCEEDED, "attempt": 2, "result": "second"}
        check_invariants([job.pk])


class TestCancel:
    def test_a_cancelled_handler_ends_its_attempt_failed_as_cancelled(self) -> None:
        job = jobs.async_sleep.enqueue(60, label="never")
        worker = Worker(concurrency=1, **FAST, scheduler=False)
        with Background(worker) as running:
            wait_for(lambda: status(job) == Status.RUNNING, what="running")
            assert worker.watchdog.cancel_async(slot_of(worker, job)) is True
            wait_for(lambda: status(job) == Status.FAILED, what="attempt failed")
        assert last_error_kind(job) == async_execution.CANCELLED
        assert fields(job.pk, "attempt")["attempt"] == 1
        assert not Hit.objects.filter(job_id=job.pk).exists()  # cancelled mid-await
        assert running.summary is not None
        assert running.summary.retried == 1

    def test_a_job_waiting_for_the_async_limit_can_be_cancelled(self) -> None:
        first = jobs.async_sleep.enqueue(60, label="first", priority=1)
        waiting = jobs.async_sleep.enqueue(60, label="waiting")
        worker = Worker(concurrency=1, async_concurrency=1, grace=0, **FAST, scheduler=False)
        with Background(worker):
            wait_for(lambda: status(waiting) == Status.RUNNING, what="both claimed")
            assert worker.watchdog.cancel_async(slot_of(worker, waiting)) is True
            wait_for(lambda: status(waiting) == Status.FAILED, what="waiting one cancelled")
            assert status(first) == Status.RUNNING
        assert last_error_kind(waiting) == async_execution.CANCELLED
        assert fields(first.pk, "status", "released") == {"status": Status.PENDING, "released": 1}

    def test_cancelling_without_a_loop_says_so(self, monkeypatch) -> None:
        monkeypatch.setattr(async_execution, "possible", lambda: False)
        worker = Worker(concurrency=1, **FAST, scheduler=False)
        worker.run(burst=True)
        slot = type("S", (), {"cancel_handler": None})()
        assert worker.watchdog.cancel_async(slot) is False


class TestStop:
    def test_stop_waits_for_short_async_jobs_and_releases_long_ones(self) -> None:
        short = jobs.async_sleep.enqueue(0.3, label="short")
        long = jobs.async_sleep.enqueue(60, label="long")
        worker = Worker(concurrency=1, grace=1.0, **FAST, scheduler=False)
        with Background(worker) as running:
            wait_for(lambda: Job.objects.filter(status=Status.RUNNING).count() == 2, what="both")
            running.worker.stop("test")
            running.thread.join(timeout=30)
        assert status(short) == Status.SUCCEEDED
        row = fields(long.pk, "status", "attempt", "released", "lease_owner")
        assert row == {"status": Status.PENDING, "attempt": 1, "released": 1, "lease_owner": ""}
        assert running.summary is not None
        # Released: whether it saw lease_lost or was cancelled, its end was never reported.
        assert (running.summary.succeeded, running.summary.released) == (1, 1)
        assert running.summary.retried == running.summary.stale == 0
        assert worker.async_pool.thread is not None
        assert not worker.async_pool.thread.is_alive()
        assert worker.async_pool.loop is not None
        assert worker.async_pool.loop.is_closed()
        assert not any(thread.is_alive() for thread in worker.async_pool.writers)


class TestCapacity:
    def test_a_process_with_async_handlers_claims_for_both_kinds(self) -> None:
        worker = Worker(concurrency=2, async_concurrency=3, **FAST)
        assert worker.options.async_enabled
        options = worker.options
        assert (options.batch, worker.loop.room.wanted()) == (100, 3)  # threads + one to find async
        worker.loop.room.async_recent = True  # as after a claim that brought an async job
        assert worker.loop.room.wanted() == 5

    def test_a_process_without_async_handlers_claims_for_its_threads_only(
        self, monkeypatch
    ) -> None:
        monkeypatch.setattr(async_execution, "possible", lambda: False)
        jobs.noop.enqueue_many([((), {})] * 3)
        worker = Worker(concurrency=2, async_concurrency=3, **FAST, scheduler=False)
        assert (worker.options.batch, worker.loop.room.wanted()) == (100, 2)
        assert worker.run(burst=True).succeeded == 3
        assert worker.async_pool.thread is None  # no loop thread started

    def test_claimed_jobs_beyond_the_async_limit_wait_leased(self) -> None:
        naps = jobs.async_sleep.enqueue_many([((60,), {})] * 3)
        worker = Worker(concurrency=1, async_concurrency=1, batch=3, grace=0, **FAST)
        worker.loop.room.lanes[0].sizer.observe(
            0.001
        )  # as after short jobs: a prefetch of up to the batch
        with Background(worker):
            ids = [j.pk for j in naps]
            running = Job.objects.filter(pk__in=ids, status=Status.RUNNING)
            wait_for(lambda: running.count() == 3, what="all three claimed")
            # One runs, two wait for the limit; the heartbeat renews all three.
            Job.objects.filter(pk__in=ids).update(lease_expires_at=shifted(1))
            renewed = Job.objects.filter(pk__in=ids, lease_expires_at__gt=shifted(2))
            wait_for(lambda: renewed.count() == 3, what="all three renewed")


class TestOptions:
    @pytest.mark.parametrize("value", [0, -1, 2.5, True, "100"])
    def test_bad_async_concurrency_is_refused(self, value) -> None:
        message = f"async_concurrency must be a positive integer, not {value!r}."
        with pytest.raises(ValueError, match=re.escape(message)):
            Worker(async_concurrency=value)


class TestInProcess:
    def test_run_job_runs_an_async_handler_in_the_callers_thread_and_transaction(self) -> None:
        from django_leasejobs.testing import run_job

        with transaction.atomic():  # the handler's async ORM call must see this transaction
            assert run_job(jobs.async_add, 20, 22) == 42
            run_job(jobs.async_record, "inline")
            assert Hit.objects.filter(label="inline").count() == 1
        with pytest.raises(RuntimeError, match="async failure on attempt 1"):
            run_job(jobs.async_flaky, succeed_on=2)
