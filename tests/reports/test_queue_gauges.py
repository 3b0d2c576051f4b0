"""Queue depth and oldest due age as OpenTelemetry observable gauges
(``reports/queue_gauges.py``), read by the SDK's in-memory reader (the ``measurements``
fixture, tests/spans.py) with the queries of ``stats.collect``, the Prometheus exporter's."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from testapp import jobs

from django_leasejobs.core import otel_metrics
from django_leasejobs.models import Job
from django_leasejobs.reports import queue_gauges, stats

from ..conftest import shifted

pytestmark = pytest.mark.django_db


def collect(measurements: Any) -> dict[str, list[Any]]:
    """A collection as the reader's next one, however soon: a reading serves both gauges of
    one collection and is kept ``FRESH`` seconds."""
    assert otel_metrics._queues is not None
    otel_metrics._queues._taken = None
    return measurements.read()


def gauges(measurements: Any) -> dict[str, dict[str, float]]:
    read = collect(measurements)
    return {
        name: {p.attributes["messaging.destination.name"]: p.value for p in read.get(name, [])}
        for name in ("leasejobs.queue.depth", "leasejobs.queue.oldest_due_age")
    }


def test_the_gauges_are_the_exporters_due_and_oldest_due_age(measurements: Any) -> None:
    queue_gauges.observe()
    assert queue_gauges.observe() is False  # once per process
    late = jobs.noop.enqueue_many([((), {})] * 2)
    Job.objects.filter(pk__in=[job.pk for job in late]).update(run_at=shifted(-120))
    jobs.noop.using(queue="mail").enqueue()
    jobs.noop.using(queue="mail", delay=3600).enqueue()  # not due
    observed = gauges(measurements)
    assert observed["leasejobs.queue.depth"] == {"default": 2, "mail": 1}
    ages = observed["leasejobs.queue.oldest_due_age"]
    assert set(ages) == {"default", "mail"}
    assert 120 <= ages["default"] < 600
    assert 0 <= ages["mail"] < 60
    expected = stats.collect()
    assert {q: n.due for q, n in expected.queues.items()} == observed["leasejobs.queue.depth"]


def test_a_collection_reads_once_what_a_scrape_reads(measurements: Any) -> None:
    queue_gauges.observe()
    jobs.noop.enqueue()
    with CaptureQueriesContext(connection) as scrape:
        stats.collect()
    with CaptureQueriesContext(connection) as collection:
        read = collect(measurements)  # both gauges, one reading
    assert read["leasejobs.queue.depth"]
    assert read["leasejobs.queue.oldest_due_age"]
    assert len(collection.captured_queries) == len(scrape.captured_queries)
    assert not any(
        "count(*)" in q["sql"].lower() and "limit" not in q["sql"].lower()
        for q in collection.captured_queries
        if "leasejobs_job" in q["sql"]
    )


@pytest.mark.django_db(databases=[])
def test_a_refused_reading_observes_nothing() -> None:
    """pytest-django refuses this test the database, as a database that is down would."""
    assert queue_gauges.read() == []
