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
    consumed = by_attributes(read["messaging.client.consumed.messages"], *keys)
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
    (point,) = measurements.read()["messaging.client.consumed.messages"]
    assert point.attributes["leasejobs.job.name"] == "testapp.tracing_jobs.async_traced"
    assert point.attributes["leasejobs.outcome"] == "succeeded"
