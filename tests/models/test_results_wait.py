"""``job.wait()`` and ``await job.await_result()`` while a worker (a thread here, with its own
connections) runs the job: the wait returns its result, or raises when it ends dead or
cancelled. On PostgreSQL the wait wakes on the finish notification; elsewhere (and with
``LEASEJOBS_NOTIFY`` off) it polls. Coroutines run under ``async_to_sync``, as Django runs
async code, so their reads use this thread's connection."""

from __future__ import annotations

import asyncio
import threading

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test import override_settings
from testapp import jobs

from django_leasejobs import JobFailedError, protocol
from django_leasejobs.core import notify
from django_leasejobs.models import DeadLetter, Job, Status, results
from django_leasejobs.runtime.worker import Worker

from ..invariants import wait_for
from ..runtime.test_worker import FAST, Background

pytestmark = pytest.mark.django_db(transaction=True)

postgresql_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="LISTEN/NOTIFY is PostgreSQL's"
)


def worker() -> Worker:
    return Worker(concurrency=2, **FAST, scheduler=False)


class TestWaitForAWorker:
    def test_returns_the_result_once_the_worker_completes_the_job(self) -> None:
        job = jobs.add.enqueue(20, 22)
        with Background(worker()):
            assert job.wait(timeout=60) == 42
        assert (job.status, job.result, job.attempt) == (Status.SUCCEEDED, 42, 1)

    def test_a_failed_attempt_with_retries_left_is_waited_through(self) -> None:
        job = jobs.flaky.enqueue(succeed_on=3)  # no backoff: its retries are due at once
        with Background(worker()):
            assert job.wait(timeout=60) == "ok on attempt 3"
        assert len(job.errors) == 2

    def test_a_job_the_worker_dead_letters_raises_with_its_error(self) -> None:
        job = jobs.always_fails.enqueue()
        with Background(worker()), pytest.raises(JobFailedError) as caught:
            job.wait(timeout=60)
        assert caught.value.status == Status.DEAD
        assert caught.value.error == "RuntimeError: boom on attempt 3"
        assert job.status == Status.DEAD

    def test_a_running_job_cancelled_by_an_operator_raises(self) -> None:
        job = jobs.sleep.enqueue(30)
        with Background(worker()):
            wait_for(lambda: _status(job) == Status.RUNNING, what="the job started")
            assert protocol.request_cancel(job.pk) is protocol.Cancel.REQUESTED
            with pytest.raises(JobFailedError, match="was cancelled") as caught:
                job.wait(timeout=60)
        assert caught.value.status == Status.CANCELLED

    def test_waiting_on_the_replay_of_a_dead_job(self) -> None:
        dead = jobs.permanent.enqueue()
        with Background(worker()):
            with pytest.raises(JobFailedError) as caught:
                dead.wait(timeout=60)
            assert caught.value.replayed_by is None
            replay = protocol.replay(DeadLetter.objects.get(job=dead).pk)
            with pytest.raises(JobFailedError) as again:
                dead.wait(timeout=60)
            assert again.value.replayed_by == replay.pk
            # The replay is a job of its own: follow the link to wait for it.
            with pytest.raises(JobFailedError) as replayed:
                jobs.permanent.get_result(again.value.replayed_by).wait(timeout=60)
        assert replayed.value.job_id == replay.pk

    def test_many_waiters_on_one_job(self) -> None:
        job = jobs.add.enqueue(1, 1, delay=3600)
        seen: list[object] = []

        def waiter() -> None:
            try:
                seen.append(Job.objects.get(pk=job.pk).wait(timeout=60))
            finally:
                connection.close()

        threads = [threading.Thread(target=waiter) for _ in range(3)]
        for thread in threads:
            thread.start()
        with Background(worker()):
            Job.objects.filter(pk=job.pk).update(run_at=job.created_at)
            for thread in threads:
                thread.join(timeout=60)
        assert seen == [2, 2, 2]

    def test_await_result_while_a_worker_runs_the_job(self) -> None:
        job = jobs.add.enqueue(2, 3)
        with Background(worker()):
            assert async_to_sync(job.await_result)(timeout=60) == 5
        assert job.status == Status.SUCCEEDED

    def test_await_result_raises_for_a_dead_job(self) -> None:
        job = jobs.permanent.enqueue()
        with Background(worker()), pytest.raises(JobFailedError, match="is dead"):
            async_to_sync(job.await_result)(timeout=60)

    def test_await_result_leaves_the_event_loop_free(self) -> None:
        job = jobs.add.enqueue(1, 2, delay=3600)
        ticks: list[int] = []

        async def main() -> None:
            async def tick() -> None:
                for n in range(5):
                    ticks.append(n)
                    await asyncio.sleep(0)

            waiting = asyncio.ensure_future(job.await_result(timeout=0.5))
            await tick()
            with pytest.raises(TimeoutError):
                await waiting

        async_to_sync(main)()
        assert ticks == [0, 1, 2, 3, 4]

    def test_polling_when_notify_is_off(self) -> None:
        job = jobs.add.enqueue(3, 4)
        with override_settings(LEASEJOBS_NOTIFY=False), Background(worker()):
            assert job.wait(timeout=60) == 7


@postgresql_only
class TestWokenByNotify:
    """With the re-read pushed far past the wait's timeout, only the finish notification can
    end these waits in time (the bound fails the test, it measures nothing)."""

    @pytest.fixture(autouse=True)
    def no_recheck(self, monkeypatch) -> None:
        monkeypatch.setattr(results, "NOTIFIED_RECHECK", 600.0)

    @staticmethod
    def make_due_once_listening(job: Job) -> threading.Thread:
        """A thread that makes ``job`` due once a caller listens for finishes."""

        def run() -> None:
            try:
                wait_for(_listening, what="the wait listens")
                Job.objects.filter(pk=job.pk).update(run_at=job.created_at)
            finally:
                connection.close()

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    def test_wait(self) -> None:
        job = jobs.add.enqueue(5, 5, delay=3600)
        with Background(worker()):
            thread = self.make_due_once_listening(job)
            assert job.wait(timeout=60) == 10
            thread.join(timeout=60)

    def test_await_result(self) -> None:
        job = jobs.add.enqueue(6, 6, delay=3600)
        with Background(worker()):
            thread = self.make_due_once_listening(job)
            assert async_to_sync(job.await_result)(timeout=60) == 12
            thread.join(timeout=60)

    def test_a_wait_that_cannot_listen_polls(self, monkeypatch, caplog) -> None:
        # A channel name LISTEN refuses (pg_notify takes any string): the LISTEN fails.
        monkeypatch.setattr(notify, "FINISHED_CHANNEL", "no such; channel")
        job = jobs.add.enqueue(7, 7)
        with Background(worker()):
            assert job.wait(timeout=60) == 14
        assert "notify.listen_failed" in caplog.text

    def test_the_listening_connection_is_closed_after_the_wait(self) -> None:
        job = jobs.add.enqueue(1, 2, delay=3600)
        with pytest.raises(TimeoutError):
            job.wait(timeout=0.3)
        wait_for(lambda: not _listening(), what="the listening session closed")


def _status(job: Job) -> str:
    return Job.objects.filter(pk=job.pk).values_list("status", flat=True).get()


def _listening() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query = %s AND datname = "
            "current_database()",
            [f"LISTEN {notify.FINISHED_CHANNEL}"],
        )
        return bool(cursor.fetchone()[0])
