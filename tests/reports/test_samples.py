"""The dashboard's per-minute samples: what a row counts, one row per (minute, queue) however
many workers write at once, when a worker's maintenance tries, and that a broken sample never
stops a worker.

Time is moved in the database: jobs' ``finished_at``, ``started_at`` and ``retried_at`` are
set inside the minute a test samples, and the minute is passed in (``sample_minute``) or read
from the database's clock (``write_sample``).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter

import pytest
from testapp import jobs

from django_leasejobs import protocol
from django_leasejobs.db.dbtime import db_now
from django_leasejobs.models import RUN_TIME_EDGES, Job, QueueSample, Status
from django_leasejobs.protocol import Failure, Outcome
from django_leasejobs.reports import samples, stats
from django_leasejobs.runtime.worker import Worker

from ..conftest import race

pytestmark = pytest.mark.django_db

FAST = {"lease": 5.0, "heartbeat": 0.1, "poll": 0.05}


def last_minute() -> dt.datetime:
    return db_now().replace(second=0, microsecond=0) - samples.MINUTE


def finished(job: Job, status: str, at: dt.datetime, run_seconds: float | None) -> None:
    """Make ``job`` a ``status`` job that finished at ``at`` after running ``run_seconds``."""
    started = None if run_seconds is None else at - dt.timedelta(seconds=run_seconds)
    Job.objects.filter(pk=job.pk).update(status=status, finished_at=at, started_at=started)


def retried(queue: str, at: dt.datetime) -> Job:
    """A job whose attempt failed and was set to be retried, at ``at``."""
    job = jobs.noop.enqueue(queue=queue)
    (running,) = protocol.claim("sampler-test", batch=1, queues=[queue])
    assert protocol.fail(job.pk, running.attempt, Failure("boom")) == Outcome.RETRIED
    Job.objects.filter(pk=job.pk).update(retried_at=at)
    return job


def sample(minute: dt.datetime, queue: str) -> QueueSample:
    return QueueSample.objects.get(minute=minute, queue=queue)


def test_a_retry_records_when_it_happened_and_a_success_does_not() -> None:
    retry = jobs.noop.enqueue()
    (running,) = protocol.claim("w", batch=1)
    before = db_now()
    protocol.fail(retry.pk, running.attempt, Failure("boom"))
    ok = jobs.noop.enqueue()
    (running,) = protocol.claim("w", batch=1)
    protocol.complete(ok.pk, running.attempt)
    rows = dict(Job.objects.values_list("pk", "retried_at"))
    assert rows[retry.pk] is not None
    assert rows[retry.pk] >= before - dt.timedelta(seconds=1)
    assert rows[ok.pk] is None


def test_lease_recovery_records_a_retry(expire_lease) -> None:
    job = jobs.noop.enqueue()
    expire_lease(*protocol.claim("gone", batch=1))
    assert protocol.recover_expired() == {job.pk: Outcome.RETRIED}
    assert Job.objects.get(pk=job.pk).retried_at is not None


def test_a_sample_counts_the_minute_s_finished_and_retried_jobs_per_queue() -> None:
    minute = last_minute()
    inside = minute + dt.timedelta(seconds=30)
    for _ in range(3):
        finished(jobs.noop.enqueue(), Status.SUCCEEDED, inside, 0.2)
    finished(jobs.noop.enqueue(), Status.DEAD, minute, 2.0)  # the minute's first instant
    finished(jobs.noop.enqueue(queue="mail"), Status.SUCCEEDED, inside, 0.004)
    # Outside the minute, on both sides, and a state the chart does not count.
    finished(jobs.noop.enqueue(), Status.SUCCEEDED, minute - dt.timedelta(microseconds=1), 1)
    finished(jobs.noop.enqueue(), Status.SUCCEEDED, minute + samples.MINUTE, 1)
    finished(jobs.noop.enqueue(), Status.CANCELLED, inside, 1)
    retried("default", inside)
    retried("mail", minute + samples.MINUTE)  # the next minute's
    samples.sample_minute(minute)
    default = sample(minute, "default")
    assert (default.succeeded, default.retried, default.dead) == (3, 1, 1)
    assert (default.runs, default.run_le_250ms, default.run_le_1s, default.run_le_2500ms) == (
        4,
        3,
        3,
        4,
    )
    mail = sample(minute, "mail")
    assert (mail.succeeded, mail.retried, mail.dead, mail.runs, mail.run_le_10ms) == (1, 0, 0, 1, 1)


def test_the_run_time_histogram_is_cumulative_and_a_job_without_a_start_has_no_run_time() -> None:
    minute = last_minute()
    at = minute + dt.timedelta(seconds=10)
    run_times = [0.01, 0.3, 4.0, 7200.0, None]
    for seconds in run_times:
        finished(jobs.noop.enqueue(), Status.SUCCEEDED, at, seconds)
    samples.sample_minute(minute)
    row = sample(minute, "default")
    assert (row.succeeded, row.runs) == (5, 4)
    for name, edge in RUN_TIME_EDGES:
        expected = sum(1 for s in run_times if s is not None and s <= edge)
        assert getattr(row, name) == expected, name


def test_depth_and_oldest_due_age_are_the_stats_of_the_moment(make_due) -> None:
    minute = last_minute()
    due = [jobs.noop.enqueue(queue="reports") for _ in range(3)]
    make_due(*due, seconds_ago=120)
    jobs.noop.enqueue(queue="reports", delay=3600)  # pending, not due
    protocol.claim("w", batch=1, queues=["reports"])
    samples.sample_minute(minute)
    row = sample(minute, "reports")
    now = stats.collect().queues["reports"]
    assert (row.due, row.running) == (2, 1) == (now.due, now.running)
    assert 120 <= row.oldest_due_age <= now.oldest_due_age
    assert (row.succeeded, row.retried, row.dead, row.runs) == (0, 0, 0, 0)


def test_write_sample_samples_the_last_whole_minute_once() -> None:
    jobs.noop.enqueue(queue="a")
    jobs.noop.enqueue(queue="b")
    before = last_minute()
    minute = samples.write_sample()
    assert minute is not None
    assert before <= minute <= last_minute()
    assert sorted(QueueSample.objects.filter(minute=minute).values_list("queue", flat=True)) == [
        "a",
        "b",
    ]
    again = samples.write_sample()
    # None: sampled already; unless the clock passed into a new minute between the two calls.
    assert again is None or again > minute
    assert QueueSample.objects.filter(minute=minute).count() == 2


def test_sampling_never_backfills_a_minute_it_did_not_see() -> None:
    """A minute no worker sampled stays missing: its depth can no longer be known."""
    jobs.noop.enqueue()
    minute = samples.write_sample()
    assert minute is not None
    assert not QueueSample.objects.filter(minute__lt=minute).exists()


@pytest.mark.django_db(transaction=True)
class TestRaces:
    def test_workers_sampling_the_same_minute_at_once_write_one_row_per_queue(self) -> None:
        minute = last_minute()
        for queue in ("a", "b", "c"):
            jobs.noop.enqueue(queue=queue)
        finished(jobs.noop.enqueue(queue="a"), Status.SUCCEEDED, minute, 0.1)
        offered = race(*(lambda: samples.sample_minute(minute) for _ in range(4)))
        assert offered == [3, 3, 3, 3]  # each computed every queue ...
        rows = Counter(QueueSample.objects.values_list("minute", "queue"))
        assert rows == {(minute, "a"): 1, (minute, "b"): 1, (minute, "c"): 1}  # ... one was kept
        assert sample(minute, "a").succeeded == 1

    def test_racing_write_samples_leave_one_row_per_queue_and_minute(self) -> None:
        for queue in ("a", "b"):
            jobs.noop.enqueue(queue=queue)
        minutes = race(*(samples.write_sample for _ in range(4)))
        assert any(m is not None for m in minutes)
        rows = Counter(QueueSample.objects.values_list("minute", "queue"))
        assert set(rows.values()) == {1}
        assert {queue for _, queue in rows} == {"a", "b"}


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class TestSampler:
    def test_tries_once_per_minute_of_its_clock_after_the_jitter(self, monkeypatch) -> None:
        tries: list[dt.datetime | None] = []
        write_sample = samples.write_sample
        monkeypatch.setattr(samples, "write_sample", lambda: tries.append(write_sample()))
        jobs.noop.enqueue()
        start = 60.0 * 16_667  # a minute's first second on the worker's clock
        clock = Clock(start + 20)
        sampler = samples.Sampler(clock=clock, jitter=lambda: 3.0)
        sampler.tick()
        assert tries == []  # not before the next minute
        clock.now = start + 60 + 2.9  # the next minute, still inside the jitter
        sampler.tick()
        assert tries == []
        clock.now = start + 60 + 3.0
        sampler.tick()
        assert len(tries) == 1
        assert tries[0] is not None
        assert QueueSample.objects.filter(minute=tries[0]).count() == 1
        clock.now = start + 60 + 50.0  # later in the same minute of its clock: no second try
        sampler.tick()
        assert len(tries) == 1
        clock.now = start + 120 + 3.0
        sampler.tick()
        assert len(tries) == 2

    def test_a_broken_sample_is_logged_and_does_not_raise(self, monkeypatch, caplog) -> None:
        def broken(using: str | None = None) -> None:
            raise RuntimeError("a bug in the history")

        monkeypatch.setattr(stats, "collect", broken)
        clock = Clock(0.0)
        sampler = samples.Sampler(clock=clock, jitter=lambda: 1.0)
        clock.now = 61.0
        with caplog.at_level(logging.ERROR, logger="django_leasejobs"):
            assert sampler.tick() is None
        assert "worker.sample_error" in caplog.text
        assert not QueueSample.objects.exists()


def due_sampler() -> samples.Sampler:
    """A sampler whose first try is due at once."""
    clock = Clock(0.0)
    sampler = samples.Sampler(clock=clock, jitter=lambda: 0.0)
    clock.now = 60.0
    return sampler


@pytest.mark.django_db(transaction=True)
class TestWorkerMaintenance:
    def test_a_worker_s_maintenance_writes_the_sample(self) -> None:
        job = jobs.noop.enqueue(queue="sampled")
        worker = Worker(**FAST, scheduler=False)
        worker.loop.maintenance.sampler = due_sampler()
        summary = worker.run(burst=True)
        assert summary.succeeded == 1
        assert Job.objects.get(pk=job.pk).status == Status.SUCCEEDED
        assert QueueSample.objects.filter(queue="sampled").count() == 1

    def test_a_broken_sample_does_not_stop_the_worker(self, monkeypatch, caplog) -> None:
        def broken(using: str | None = None) -> None:
            raise RuntimeError("a bug in the history")

        monkeypatch.setattr(stats, "collect", broken)
        job = jobs.noop.enqueue()
        worker = Worker(**FAST)
        worker.loop.maintenance.sampler = due_sampler()
        with caplog.at_level(logging.ERROR, logger="django_leasejobs"):
            summary = worker.run(burst=True)
        assert summary.succeeded == 1
        assert Job.objects.get(pk=job.pk).status == Status.SUCCEEDED
        assert "worker.sample_error" in caplog.text
