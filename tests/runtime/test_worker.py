"""The worker in-process: claim, run, heartbeat, lose a lease, stop, survive database errors.

These tests run the real loop and its threads against the real database (``transaction=True``,
since the pool threads have their own connections). Time is moved in the database; waits poll
the database for a condition.
"""

from __future__ import annotations

import logging
import re
import threading

import pytest
from django.db import OperationalError, connection
from testapp import jobs
from testapp.models import Hit

from django_leasejobs import protocol
from django_leasejobs.models import DeadLetter, Job, Status
from django_leasejobs.protocol import Outcome
from django_leasejobs.runtime.worker import Summary, Worker, default_worker_id, parse_queues

from ..conftest import fields, shifted, take_over
from ..invariants import check_invariants, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

FAST = {"lease": 5.0, "heartbeat": 0.1, "poll": 0.05}


class Background:
    """A worker running ``run()`` in a thread, so the test can act on the database meanwhile."""

    def __init__(self, worker: Worker, burst: bool = False) -> None:
        self.worker = worker
        self.summary: Summary | None = None
        self.thread = threading.Thread(target=self._run, args=(burst,), daemon=True)

    def _run(self, burst: bool) -> None:
        from django.db import connection

        try:
            self.summary = self.worker.run(burst=burst)
        finally:
            connection.close()

    def __enter__(self) -> Background:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.worker.stop("test over")
        self.thread.join(timeout=30)
        assert not self.thread.is_alive(), "worker did not stop"


def status(job: Job) -> str:
    return fields(job.pk, "status")["status"]


class TestBurst:
    def test_burst_runs_every_due_job_once_and_leaves_future_ones(self) -> None:
        due = jobs.record.enqueue_many([((f"j{i}",), {}) for i in range(25)])
        later = jobs.record.enqueue("later", delay=3600)
        summary = Worker(concurrency=4, batch=3, **FAST, scheduler=False).run(burst=True)
        assert summary.succeeded == 25
        assert (summary.retried, summary.dead, summary.stale, summary.released) == (0, 0, 0, 0)
        assert status(later) == Status.PENDING
        check_invariants([j.pk for j in due])
        assert Hit.objects.filter(job_id__in=[j.pk for j in due]).count() == 25

    def test_burst_also_runs_retries_that_fall_due_while_it_runs(self) -> None:
        # Zero backoff: each retry is due at once. The waiter keeps the burst running until both
        # jobs have finished, so they can only finish through retries taken during the burst.
        poison = jobs.always_fails.enqueue()
        ok = jobs.flaky.enqueue(succeed_on=2)
        jobs.wait_until_final.enqueue([poison.pk, ok.pk], priority=-1)
        summary = Worker(concurrency=3, **FAST).run(burst=True)
        assert status(poison) == Status.DEAD
        assert status(ok) == Status.SUCCEEDED
        assert (summary.succeeded, summary.retried, summary.dead) == (2, 3, 1)
        assert DeadLetter.objects.get(job_id=poison.pk).reason == "attempts exhausted"
        check_invariants([poison.pk, ok.pk])

    def test_return_values_are_stored_and_plain_successes_are_completed_together(self) -> None:
        summed = jobs.add.enqueue(1, 2)
        plain = jobs.noop.enqueue_many([((), {})] * 10)
        summary = Worker(concurrency=4, **FAST).run(burst=True)
        assert summary.succeeded == 11
        assert fields(summed.pk, "status", "result") == {"status": Status.SUCCEEDED, "result": 3}
        check_invariants([summed.pk, *(j.pk for j in plain)])

    def test_burst_with_nothing_due_exits_at_once(self) -> None:
        summary = Worker(**FAST).run(burst=True)
        assert summary.reported == 0
        assert summary.claimed == 0

    def test_max_jobs_stops_after_that_many_claims(self) -> None:
        jobs.noop.enqueue_many([((), {})] * 10)
        summary = Worker(concurrency=4, batch=4, max_jobs=3, **FAST).run()
        assert summary.claimed == 3 == summary.succeeded
        assert Job.objects.filter(status=Status.PENDING).count() == 7

    def test_only_the_given_queues_are_taken(self) -> None:
        default = jobs.noop.enqueue()
        other = jobs.other_queue.enqueue()
        Worker(["other"], **FAST).run(burst=True)
        assert status(other) == Status.SUCCEEDED
        assert status(default) == Status.PENDING
        Worker(None, **FAST).run(burst=True)
        assert status(default) == Status.SUCCEEDED

    def test_no_transaction_is_open_while_a_handler_runs(self) -> None:
        job = jobs.observe_transaction.enqueue()
        Worker(concurrency=1, **FAST).run(burst=True)
        assert Hit.objects.get(job_id=job.pk).label == "atomic=False autocommit=True"

    def test_expired_leases_are_recovered_then_run_again(self) -> None:
        job = jobs.record.enqueue("again")
        (claimed,) = protocol.claim("crashed-worker", batch=1)
        Job.objects.filter(pk=job.pk).update(lease_expires_at=shifted(-1))
        worker = Worker(**FAST)
        worker.run(burst=True)  # recovers it: failed, with a backoff
        assert fields(job.pk, "status", "attempt") == {"status": Status.FAILED, "attempt": 1}
        Job.objects.filter(pk=job.pk).update(run_at=shifted(-1))
        assert Worker(**FAST).run(burst=True).succeeded == 1
        assert fields(job.pk, "status", "attempt") == {"status": Status.SUCCEEDED, "attempt": 2}
        assert claimed.attempt == 1
        check_invariants([job.pk])


class TestHeartbeat:
    def test_heartbeat_keeps_a_long_job_leased_past_its_lease(self) -> None:
        job = jobs.sleep.enqueue(1.0, label="long")
        with Background(Worker(concurrency=1, lease=0.5, heartbeat=0.1, poll=0.05)):
            wait_for(lambda: Hit.objects.filter(job_id=job.pk).exists(), what="job ran")
            wait_for(lambda: status(job) == Status.SUCCEEDED, what="job succeeded")
        # Lease 0.5 s, job 1 s: only renewals kept it from being recovered as expired.
        assert fields(job.pk, "attempt", "errors") == {"attempt": 1, "errors": []}

    def test_a_lost_lease_stops_the_handler_and_its_result_is_never_written(self) -> None:
        job = jobs.sleep.enqueue(60, label="first")
        worker = Worker(concurrency=1, **FAST)
        with Background(worker) as running:
            wait_for(lambda: status(job) == Status.RUNNING, what="job claimed")
            second = take_over(job.pk)  # another worker takes the job over between two beats
            assert second.attempt == 2
            # The heartbeat finds the lease lost; the handler stops early and records its run.
            wait_for(lambda: Hit.objects.filter(job_id=job.pk, attempt=1).exists(), what="stop")
            wait_for(lambda: running.worker.slots.total == 0, what="slot freed")
            assert protocol.complete(second.pk, second.attempt, "second") is Outcome.SUCCEEDED
        assert running.summary is not None
        assert running.summary.stale == 1
        assert running.summary.succeeded == 0
        row = fields(job.pk, "status", "attempt", "result")
        assert row == {"status": Status.SUCCEEDED, "attempt": 2, "result": "second"}
        check_invariants([job.pk])


class TestStop:
    def test_stop_lets_short_jobs_finish_and_releases_long_ones(self) -> None:
        short = jobs.sleep.enqueue(0.3, label="short")
        long = jobs.sleep.enqueue(60, label="long")
        # A grace well past the short job's 0.3 s: its completion's commit can wait on the disk
        # (fsync) behind other writers on a loaded machine; a 1 s grace was missed once in CI.
        worker = Worker(concurrency=2, grace=5.0, **FAST)
        with Background(worker) as running:
            wait_for(lambda: Job.objects.filter(status=Status.RUNNING).count() == 2, what="both")
            running.worker.stop("test")
            running.thread.join(timeout=30)
        assert status(short) == Status.SUCCEEDED
        row = fields(long.pk, "status", "attempt", "released", "lease_owner")
        assert row == {"status": Status.PENDING, "attempt": 1, "released": 1, "lease_owner": ""}
        assert running.summary is not None
        assert (running.summary.succeeded, running.summary.released) == (1, 1)

    def test_a_released_job_runs_again_with_a_higher_token(self) -> None:
        long = jobs.sleep.enqueue(60, label="long")
        with Background(Worker(concurrency=1, grace=0, **FAST)) as running:
            wait_for(lambda: status(long) == Status.RUNNING, what="claimed")
        assert running.summary is not None
        assert running.summary.released == 1
        (again,) = protocol.claim("next", batch=1)
        assert again.attempt == 2
        assert again.attempts_charged == 1


class TestScheduler:
    def test_maintenance_runs_when_the_scheduler_is_on(self) -> None:
        calls: list[int] = []
        Worker(**FAST, maintenance=[lambda: calls.append(1)]).run(burst=True)
        assert calls

    def test_a_failing_scheduler_task_is_logged_and_jobs_still_run(self, caplog) -> None:
        def broken() -> None:
            raise RuntimeError("bad schedule")

        job = jobs.noop.enqueue()
        with caplog.at_level(logging.ERROR, logger="django_leasejobs"):
            summary = Worker(**FAST, maintenance=[broken]).run(burst=True)
        assert summary.succeeded == 1
        assert status(job) == Status.SUCCEEDED
        assert "worker.scheduler_error" in caplog.text

    def test_no_scheduler_runs_no_maintenance(self) -> None:
        calls: list[int] = []
        Worker(**FAST, scheduler=False, maintenance=[lambda: calls.append(1)]).run(burst=True)
        assert calls == []


class TestDatabaseErrors:
    def test_database_errors_back_off_and_the_worker_carries_on(self, caplog) -> None:
        failures = iter(range(3))

        def flaky_maintenance() -> None:
            if next(failures, None) is not None:
                raise OperationalError("server closed the connection unexpectedly")

        job = jobs.record.enqueue("after outage")
        worker = Worker(concurrency=2, **FAST, maintenance=[flaky_maintenance])
        with caplog.at_level(logging.WARNING, logger="django_leasejobs"):
            summary = worker.run(burst=True)
        assert summary.succeeded == 1
        assert status(job) == Status.SUCCEEDED
        delays = re.findall(r"where=maintenance retry_in=([\d.]+)", caplog.text)
        assert delays == ["0.25", "0.50", "1.00"]
        assert all(t.is_alive() is False for t in worker.pool.threads)


class TestThreads:
    @pytest.mark.parametrize("job_function", [jobs.interrupts, jobs.exits])
    def test_a_handler_raising_interrupt_or_exit_fails_its_attempt_and_keeps_the_thread(
        self, job_function, caplog
    ) -> None:
        """In a pool thread a KeyboardInterrupt can only be the handler's own ``raise``: it
        fails the attempt like SystemExit, and the single thread goes on to the next job."""
        bad = job_function.enqueue(max_attempts=1)
        good = jobs.noop.enqueue_many([((), {})] * 3)
        worker = Worker(concurrency=1, **FAST)
        with caplog.at_level(logging.ERROR, logger="django_leasejobs"):
            summary = worker.run(burst=True)
        assert (summary.succeeded, summary.dead) == (3, 1)
        assert "worker.thread_error" not in caplog.text
        row = fields(bad.pk, "status", "last_error")
        assert row["status"] == Status.DEAD
        assert row["last_error"].split(":")[0] in ("KeyboardInterrupt", "SystemExit")
        check_invariants([j.pk for j in good])


class TestOptions:
    @pytest.mark.parametrize(
        ("options", "message"),
        [
            ({"concurrency": 0}, "concurrency must be a positive integer"),
            ({"concurrency": 2.5}, "concurrency must be a positive integer"),
            ({"batch": -1}, "batch must be a positive integer"),
            ({"lease": 0}, "lease must be a positive number"),
            ({"lease": 10, "heartbeat": 10}, "heartbeat (10 s) must be shorter than the lease"),
            ({"lease": 10, "heartbeat": 20}, "must be shorter than the lease"),
            ({"poll": -1}, "poll must be a positive number"),
            ({"max_jobs": 0}, "max_jobs must be a positive integer"),
            ({"max_stuck": 0}, "max_stuck must be a positive integer"),
            ({"max_stuck": 1.5}, "max_stuck must be a positive integer"),
            ({"max_stuck": True}, "max_stuck must be a positive integer"),
            ({"grace": -1}, "grace must be a number of seconds >= 0"),
            ({"queues": []}, "queues must be a non-empty list"),
            ({"queues": ["a", ""]}, "queues must be a non-empty list"),
            ({"queues": "default"}, "not a string"),
            ({"worker_id": " "}, "worker_id must be a non-empty string"),
        ],
    )
    def test_bad_options_are_refused_with_a_clear_message(self, options, message) -> None:
        with pytest.raises(ValueError, match=re.escape(message)):
            Worker(**options)

    def test_defaults_come_from_settings(self, settings) -> None:
        settings.LEASEJOBS_LEASE_SECONDS = 40
        settings.LEASEJOBS_HEARTBEAT_SECONDS = 7
        worker = Worker(concurrency=3)
        # The test project has async handlers: the batch covers the 100 async slots too.
        options = worker.options
        assert (options.lease, options.heartbeat, options.batch) == (40.0, 7.0, 103)

    def test_worker_ids_are_unique_per_start(self) -> None:
        ids = {default_worker_id() for _ in range(50)}
        assert len(ids) == 50
        assert Worker().options.worker_id != Worker().options.worker_id

    def test_parse_queues(self) -> None:
        assert parse_queues("*") is None
        assert parse_queues("a, b") == ["a", "b"]
        for bad in ("", ",", "a,,b", " "):
            with pytest.raises(ValueError, match="comma-separated queue names"):
                parse_queues(bad)


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="LISTEN/NOTIFY is PostgreSQL's",
)
class TestNotify:
    """An idle worker wakes on NOTIFY: with a 60 s poll, only the notification can start the job
    within the wait below (the bound is there to fail the test, not to measure it)."""

    def test_an_idle_worker_wakes_on_enqueue(self) -> None:
        worker = Worker(concurrency=1, lease=120.0, heartbeat=30.0, poll=60.0)
        with Background(worker):
            wait_for(
                lambda: worker.wakeup.listener is not None and worker.wakeup.listener.connected()
            )
            job = jobs.noop.enqueue()
            wait_for(lambda: status(job) == Status.SUCCEEDED, timeout=20, what="woken by NOTIFY")

    def test_a_notification_for_another_queue_does_not_start_its_job(self) -> None:
        worker = Worker(queues=["default"], concurrency=1, lease=120.0, heartbeat=30.0, poll=60.0)
        with Background(worker):
            wait_for(
                lambda: worker.wakeup.listener is not None and worker.wakeup.listener.connected()
            )
            other = jobs.other_queue.enqueue()
            mine = jobs.noop.enqueue()
            wait_for(lambda: status(mine) == Status.SUCCEEDED, timeout=20, what="own queue")
            assert status(other) == Status.PENDING

    def test_burst_workers_do_not_listen(self) -> None:
        worker = Worker(concurrency=1, **FAST)
        worker.run(burst=True)
        assert worker.wakeup.listener is None
