"""OpenTelemetry metrics of enqueues and attempts (``core/otel_metrics.py``), read with the
SDK's in-memory reader (the ``measurements`` fixture, tests/spans.py)."""

from __future__ import annotations

from typing import Any

import pytest
from testapp import jobs, retry_jobs, tracing_jobs

from django_leasejobs.runtime.worker import Worker
from django_leasejobs.testing import drain

pytestmark = pytest.mark.django_db

WORKER = {"lease": 5.0, "heartbeat": 0.1, "poll": 0.05, "scheduler": False}


def by_attributes(points: list[Any], *keys: str) -> dict[tuple[Any, ...], Any]:
    return {tuple(p.attributes.get(k) for k in keys): p for p in points}


def attempts(read: dict[str, list[Any]]) -> list[Any]:
    """The attempts counted since the last read: the observable counter reports every
    attribute set it has seen at each collection, those with nothing new as 0."""
    return [p for p in read["messaging.client.consumed.messages"] if p.value]


def test_enqueues_are_counted_by_queue_and_name(measurements: Any) -> None:
    tracing_jobs.traced.enqueue("a")
    tracing_jobs.traced.enqueue_many([(["b"], {}), {"args": ["c"], "queue": "other"}])
    jobs.noop.enqueue(dedupe_key="once")
    jobs.noop.enqueue(dedupe_key="once")  # the live job holding the key: nothing sent
    sent = by_attributes(
        measurements.read()["messaging.client.sent.messages"],
        "messaging.destination.name",
        "leasejobs.job.name",
    )
    assert {key: point.value for key, point in sent.items()} == {
        ("default", "testapp.tracing_jobs.traced"): 2,
        ("other", "testapp.tracing_jobs.traced"): 1,
        ("default", "testapp.jobs.noop"): 1,
    }
    point = sent[("default", "testapp.jobs.noop")]
    assert point.attributes["messaging.system"] == "django_leasejobs"
    assert point.attributes["messaging.operation.name"] == "send"


def test_attempts_are_counted_and_timed_by_outcome(measurements: Any) -> None:
    tracing_jobs.traced.enqueue("a")
    tracing_jobs.broken.enqueue()
    retry_jobs.snooze_once.enqueue(600)
    drain()
    read = measurements.read()
    keys = ("leasejobs.job.name", "leasejobs.outcome", "error.type")
    consumed = by_attributes(attempts(read), *keys)
    assert {key: point.value for key, point in consumed.items()} == {
        ("testapp.tracing_jobs.traced", "succeeded", None): 1,
        ("testapp.tracing_jobs.broken", "failed", "ValueError"): 1,
        ("testapp.retry_jobs.snooze_once", "snoozed", None): 1,
    }
    durations = by_attributes(read["messaging.process.duration"], *keys)
    assert set(durations) == set(consumed)
    for point in durations.values():
        assert point.count == 1
        assert point.sum >= 0


@pytest.mark.django_db(transaction=True)
def test_an_async_attempt_is_counted(measurements: Any) -> None:
    tracing_jobs.async_traced.enqueue("x")
    assert Worker(**WORKER).run(burst=True).succeeded == 1
    (point,) = attempts(measurements.read())
    assert point.attributes["leasejobs.job.name"] == "testapp.tracing_jobs.async_traced"
    assert point.attributes["leasejobs.outcome"] == "succeeded"


@pytest.mark.django_db(transaction=True)
def test_each_claim_is_timed_and_sized(measurements: Any) -> None:
    jobs.noop.enqueue_many([((), {})] * 3)
    assert Worker(batch=10, **WORKER).run(burst=True).succeeded == 3
    read = measurements.read()
    (size,) = read["leasejobs.claim.size"]
    (duration,) = read["leasejobs.claim.duration"]
    for point in (size, duration):
        assert point.attributes == {
            "messaging.system": "django_leasejobs",
            "leasejobs.claim.queues": "*",
        }
    # The claim that took the three, and the empty one(s) that found nothing more.
    assert size.count == duration.count >= 2
    assert (size.sum, size.max, size.min) == (3, 3, 0)
    assert duration.sum > 0


@pytest.mark.django_db(transaction=True)
def test_dead_letters_are_counted_by_job_name_once_committed(measurements: Any) -> None:
    tracing_jobs.broken.enqueue()
    tracing_jobs.broken.enqueue(queue="other")
    jobs.noop.enqueue()
    assert Worker(**WORKER, queues=["default", "other"]).run(burst=True).dead == 2
    dead = by_attributes(
        measurements.read()["leasejobs.dead_letters"],
        "messaging.destination.name",
        "leasejobs.job.name",
    )
    assert {key: point.value for key, point in dead.items()} == {
        ("default", "testapp.tracing_jobs.broken"): 1,
        ("other", "testapp.tracing_jobs.broken"): 1,
    }


def test_a_rolled_back_dead_letter_is_not_counted(measurements: Any) -> None:
    """Here the test's transaction never commits: the dead letter is not counted."""
    tracing_jobs.broken.enqueue()
    assert drain().dead == 1
    assert "leasejobs.dead_letters" not in measurements.read()
