"""Queue depth and oldest due age as OpenTelemetry observable gauges, read from :mod:`.stats`.

The gauges (``core/otel_metrics.py``) are read when the project's metric reader collects, on
the reader's thread, by the same :func:`.stats.collect` the Prometheus exporter and the health
view read: capped counts through the ``leasejobs_waiting`` index and an index range's first
entry per queue, never a count over the job table, so a collection costs what a scrape does
whatever the backlog. Its ``due`` and ``oldest_due_age`` are the Prometheus exporter's
``leasejobs_jobs_due`` and ``leasejobs_oldest_due_age_seconds``.
"""

from __future__ import annotations

import logging

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from ..core import otel_metrics
from . import shards

logger = logging.getLogger("django_leasejobs")


def observe() -> bool:
    """Register the gauges, once per process (the worker does, as it starts). False when they
    were registered already, or without ``opentelemetry-api``."""
    return otel_metrics.observe_queues(read)


def read() -> list[otel_metrics.QueueRow]:
    """Every counted queue's due jobs and oldest due age, from every queue database; nothing
    from a database that cannot answer (a collection must never raise into the project's
    metric reader)."""
    try:
        readings = shards.read_each(probe=False, lag=False)
    except Exception as exc:  # the reader's thread is the project's: log, never raise
        logger.warning("metrics.gauges_error error=%s", exc)
        return []
    for reading in readings:
        if reading.error is not None:
            logger.warning(
                "metrics.gauges_error database=%s error=%s", reading.database, reading.error
            )
        _close(connections[reading.source])
    return [
        (queue, float(numbers.due), numbers.oldest_due_age)
        for queue, numbers in sorted(shards.merged_queues(readings).items())
    ]


def _close(connection: BaseDatabaseWrapper) -> None:
    """Close this thread's connection unless a transaction holds it: the reader's thread is
    not a request's, and nothing else would close what the collection opened."""
    if not connection.in_atomic_block:
        connection.close()
