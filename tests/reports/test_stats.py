"""stats.collect(): per-queue depth, oldest due age, expired leases and dead-letter rate."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test import override_settings
from testapp import jobs

from django_leasejobs import Backoff, protocol
from django_leasejobs.dialects import counting
from django_leasejobs.models import DeadLetter
from django_leasejobs.protocol import Failure, Outcome
from django_leasejobs.reports import stats

from ..conftest import shifted

pytestmark = pytest.mark.django_db

FIELDS = {
    "paused_age",
    "approximate",
    "pending",
    "due",
    "running",
    "failed",
    "expired_leases",
    "dead_last_hour",
    "dead_last_day",
    "oldest_due_age",
}


def test_an_empty_database_has_no_queues_and_zero_totals() -> None:
    result = stats.collect()
    assert result.queues == {}
    assert result.total == stats.QueueStats()
    assert result.total.oldest_due_age == 0.0
    assert result.now is not None


@override_settings(LEASEJOBS_QUEUES=["mail", "default"])
def test_declared_queues_always_appear() -> None:
    result = stats.collect()
    assert list(result.queues) == ["default", "mail"]
    assert all(q == stats.QueueStats() for q in result.queues.values())


def test_counts_per_queue_and_total(make_due, expire_lease) -> None:
    # default: two pending not yet due, two due (the oldest became due 120 s ago).
    jobs.noop.enqueue(delay=3600)
    jobs.noop.enqueue(delay=3600)
    old, recent = jobs.noop.enqueue(), jobs.noop.enqueue()
    make_due(old, seconds_ago=120)
    make_due(recent, seconds_ago=5)
    # other: one due 30 s ago.
    make_due(jobs.other_queue.enqueue(), seconds_ago=30)
    # busy: two running, one of them with an expired lease; one failed waiting for its retry.
    for _ in range(3):
        jobs.noop.enqueue(queue="busy")
    first, second, third = protocol.claim("w1", queues=["busy"], batch=3)
    expire_lease(first, seconds_ago=10)
    retried = protocol.fail(
        third.pk, third.attempt, Failure("boom"), backoff=Backoff(100, 100, "none")
    )
    assert retried is Outcome.RETRIED
    # dead: one now in "busy", one two hours ago in "default", one two days ago in "other".
    for queue, hours_ago in (("busy", 0), ("default", 2), ("other", 48)):
        dead_job = jobs.permanent.enqueue(queue=queue, priority=100)
        (claimed,) = protocol.claim("w2", queues=[queue], batch=1)
        assert claimed.pk == dead_job.pk
        assert protocol.fail(claimed.pk, claimed.attempt, Failure("x"), retryable=False) == (
            Outcome.DEAD
        )
        DeadLetter.objects.filter(job=dead_job).update(created_at=shifted(-hours_ago * 3600))

    result = stats.collect()

    default = result.queues["default"]
    assert (default.pending, default.due, default.running, default.failed) == (4, 2, 0, 0)
    assert 120 <= default.oldest_due_age < 180
    assert (default.dead_last_hour, default.dead_last_day) == (0, 1)

    other = result.queues["other"]
    assert (other.pending, other.due) == (1, 1)
    assert 30 <= other.oldest_due_age < 90
    assert (other.dead_last_hour, other.dead_last_day) == (0, 0)

    busy = result.queues["busy"]
    assert (busy.pending, busy.due, busy.running, busy.failed) == (0, 0, 2, 1)
    assert busy.expired_leases == 1
    assert busy.oldest_due_age == 0.0
    assert (busy.dead_last_hour, busy.dead_last_day) == (1, 1)
    assert second.pk != first.pk

    total = result.total
    assert (total.pending, total.due, total.running, total.failed) == (5, 3, 2, 1)
    assert total.expired_leases == 1
    assert (total.dead_last_hour, total.dead_last_day) == (1, 2)
    assert total.oldest_due_age == default.oldest_due_age


def test_a_failed_job_that_is_due_counts_as_due_with_its_age(make_due) -> None:
    job = jobs.noop.enqueue()
    (claimed,) = protocol.claim("w1", batch=1)
    protocol.fail(claimed.pk, claimed.attempt, Failure("boom"), backoff=Backoff(0, 0, "none"))
    make_due(job, seconds_ago=600)
    result = stats.collect().queues["default"]
    assert (result.pending, result.failed, result.due) == (0, 1, 1)
    assert 600 <= result.oldest_due_age < 660


def test_finished_jobs_are_not_counted(make_due) -> None:
    job = jobs.noop.enqueue()
    (claimed,) = protocol.claim("w1", batch=1)
    assert protocol.complete(claimed.pk, claimed.attempt) is Outcome.SUCCEEDED
    cancelled = jobs.noop.enqueue()
    assert protocol.cancel(cancelled.pk)
    assert job.pk != cancelled.pk
    assert stats.collect().total == stats.QueueStats()


def test_as_dict_is_json_ready_and_names_every_field(make_due) -> None:
    make_due(jobs.noop.enqueue(), seconds_ago=10)
    data = json.loads(json.dumps(stats.collect().as_dict()))
    assert set(data) == {
        "now",
        "total",
        "queues",
        "queues_omitted",
        "paused_jobs",
        "workers",
        "stuck",
        "unknown_jobs",
    }
    assert (data["workers"], data["stuck"], data["unknown_jobs"]) == ([], 0, {})
    assert set(data["total"]) == FIELDS
    assert set(data["queues"]["default"]) == FIELDS
    assert data["queues"]["default"]["due"] == 1
    assert isinstance(data["total"]["oldest_due_age"], float)


def expected_kind() -> str:
    return "estimate" if connection.vendor == "postgresql" else "at least"


def test_counts_past_the_cap_are_marked_approximate(make_due, monkeypatch) -> None:
    monkeypatch.setattr(counting, "CAP", 2)
    waiting = [jobs.noop.enqueue() for _ in range(4)]
    make_due(*waiting[:3], seconds_ago=10)
    make_due(waiting[0], seconds_ago=100)
    jobs.other_queue.enqueue(delay=3600)

    result = stats.collect()

    default, other = result.queues["default"], result.queues["other"]
    assert default.approximate == {"pending": expected_kind(), "due": expected_kind()}
    assert default.pending >= 2  # the cap at least, or more
    assert default.due >= 2
    # The oldest due job is found, not counted: exact however long the queue.
    assert 100 <= default.oldest_due_age < 160
    assert (other.pending, other.due, other.approximate) == (1, 0, {})
    assert result.total.approximate == default.approximate
    assert result.as_dict()["queues"]["default"]["approximate"] == default.approximate
    assert not default.counted("pending").exact
    assert other.counted("pending").text() == "1"


def test_an_estimate_in_a_sum_makes_the_total_an_estimate() -> None:
    total = stats.QueueStats()
    first = stats.QueueStats(pending=10_001, approximate={"pending": "at least"})
    second = stats.QueueStats(pending=20_000, approximate={"pending": "estimate"})
    total.add(first)
    total.add(second)
    total.add(stats.QueueStats(pending=1))
    assert (total.pending, total.approximate) == (30_002, {"pending": "estimate"})


def test_waiting_queues_lists_queues_with_pending_or_failed_jobs_only() -> None:
    jobs.noop.enqueue(queue="b")
    jobs.noop.enqueue(queue="a")
    jobs.noop.enqueue(queue="a")
    jobs.noop.enqueue(queue="only-running")
    (running,) = protocol.claim("w", queues=["only-running"], batch=1)
    jobs.noop.enqueue(queue="only-finished")
    (finished,) = protocol.claim("w", queues=["only-finished"], batch=1)
    assert protocol.complete(finished.pk, finished.attempt) is Outcome.SUCCEEDED
    assert running.queue == "only-running"
    assert stats.waiting_queues("default") == ["a", "b"]
